"""CPU time of one acknowledged ``memory_write``: the caller's thread and the Writer's transaction.

``python -m benchmarks.write_cpu [--store postgres] [--baseline DIR]``: one
trio task writes ``--writes`` memories one after the other through
``Service.call("memory_write", ...)`` on a new store, embedding deferred (the
Embedder stores the vectors in the background, as in production). Per write
it records the wall time from call to acknowledgement, the CPU time of the
calling thread during the call (validation, the bridge, building the reply)
and the CPU time of the Writer's thread for the transaction that committed it
(``time.thread_time``, so other processes and the background actors do not
count). On a busy machine the wall time is mostly waiting for a core; the CPU
times are what one write costs.

With ``--baseline DIR`` (another checkout, e.g. ``git worktree add /tmp/m3-base
main``) the same measurement runs first with that checkout's m3, then with this
one, each in its own process; the second row's ratios are against the first.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

from benchmarks.data import default_data_dir
from benchmarks.embedding import cached_embedder, default_cache_path, prewarm
from benchmarks.ingest import STORES, store_system
from benchmarks.perf_write import write_texts
from benchmarks.report import rows_text
from m3.actors import writer as writer_module
from m3.gateway.registry import default_registry
from m3.gateway.service import CallContext, Service
from m3.protocols.messages import memory as mem

#: Writes before the measured ones (connections, statement caches, the model's first batch).
WARM_UP = 50


def _count_writer_cpu(samples: list[float]) -> Callable[[], None]:
    """Record the Writer thread's CPU per write of each transaction that held only writes; returns the
    function that puts the Writer back as it was.

    The Writer's commit step is ``_commit(batch)`` in this checkout and ``_flush()`` (its batch in
    ``_pending``) in older ones; whichever exists is wrapped.
    """
    cls: Any = writer_module.Writer
    writes = (mem.WriteMemories, mem.WriteMemory)

    def timed(run: Any, batch: list[Any]) -> None:
        only_writes = bool(batch) and all(isinstance(env.message, writes) for env in batch)
        begun = time.thread_time()
        run()
        if only_writes:
            samples.append((time.thread_time() - begun) / len(batch))

    if hasattr(cls, "_commit"):
        name, original = "_commit", cls._commit
        cls._commit = lambda self, batch: timed(lambda: original(self, batch), batch)
    else:
        name, original = "_flush", cls._flush
        cls._flush = lambda self: timed(lambda: original(self), list(self._pending))
    return lambda: setattr(cls, name, original)


def measure(store: str, data: Path, cache: Path, writes: int) -> dict[str, Any]:
    writer_cpu: list[float] = []
    restore = _count_writer_cpu(writer_cpu)
    try:
        return _measure(store, data, cache, writes, writer_cpu)
    finally:
        restore()


def _measure(store: str, data: Path, cache: Path, writes: int, writer_cpu: list[float]) -> dict[str, Any]:
    texts = write_texts(data, writes + WARM_UP)
    embedder = cached_embedder(cache)
    prewarm(embedder, texts)
    wall: list[float] = []
    caller_cpu: list[float] = []
    with store_system(store, embedder) as system:
        service = Service(system.config, system, default_registry())
        ctx = CallContext(agent_id="bench-writer")

        async def write_all() -> None:
            for text in texts[:WARM_UP]:
                await service.call("memory_write", {"content": text, "type": "note"}, ctx)
            system.wait_embedded(600.0)
            writer_cpu.clear()
            for text in texts[WARM_UP:]:
                began, cpu = time.perf_counter(), time.thread_time()
                await service.call("memory_write", {"content": text, "type": "note"}, ctx)
                wall.append(time.perf_counter() - began)
                caller_cpu.append(time.thread_time() - cpu)

        trio.run(write_all)
    return {"store": store, "writes": len(wall), "load": round(os.getloadavg()[0], 1),
            "wall_p50_ms": _median_ms(wall), "caller_cpu_p50_ms": _median_ms(caller_cpu),
            "writer_cpu_p50_ms": _median_ms(writer_cpu),
            "cpu_p50_ms": round(_median_ms(caller_cpu) + _median_ms(writer_cpu), 3)}


def _median_ms(seconds: list[float]) -> float:
    return round(sorted(seconds)[len(seconds) // 2] * 1000, 3) if seconds else float("nan")


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=default_data_dir())
    parser.add_argument("--cache", type=Path, default=default_cache_path())
    parser.add_argument("--writes", type=int, default=1000)
    parser.add_argument("--store", choices=STORES, default="sqlite")
    parser.add_argument("--baseline", type=Path, default=None, help="another checkout of m3 to compare with")
    parser.add_argument("--json", action="store_true", help="print one JSON row (used by --baseline)")
    args = parser.parse_args(argv)
    if args.baseline is None:
        rows = [measure(args.store, args.data, args.cache, args.writes)]
    else:
        from benchmarks.versions import add_ratios, run_versions  # parent process only (see benchmarks.versions)

        rows = run_versions(Path(__file__), args.baseline, ["--store", args.store, "--writes", str(args.writes),
                                                            "--data", str(args.data), "--cache", str(args.cache)])
        add_ratios(rows, ("wall_p50_ms", "caller_cpu_p50_ms", "writer_cpu_p50_ms", "cpu_p50_ms"),
                   lambda key: key.replace("_ms", "_x"))
    if args.json:
        print(json.dumps(rows[0]))
    else:
        print(rows_text(rows, "CPU time of one acknowledged memory_write (medians)"))
    return rows


if __name__ == "__main__":
    main()
