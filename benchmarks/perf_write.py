"""Write acknowledgement latency and throughput with 1, 16 and 64 concurrent writers.

``python -m benchmarks.perf_write [--store postgres]``: each level gets a new
store (a temporary SQLite file, or a private embedded PostgreSQL cluster) and
its writers are trio tasks calling the gateway's ``Service.call("memory_write",
...)`` (argument validation, the trio-to-actor bridge, the Writer's group
commit) in a loop, one write at a time each. Embedding is deferred, as in
production: the Embedder actor embeds in the background (through the
embedding cache, so texts seen before cost a lookup, not a model run) and
hands vectors to the same Writer. Latency is from call to acknowledgement
(committed). Ratios compare the levels of this one run.

``--baseline DIR`` compares two versions of m3 in one run (A/B): ``DIR`` is
another checkout (``git worktree add /tmp/m3-base main``). Each level runs
in a subprocess of each version, ``--rounds N`` times (default 1), the baseline
first in odd rounds and this checkout first in even ones; the rows say which
version ran in which round, and the new one's ratios are against the
baseline's row of the same level and round. Every row carries the load
average when its level ended.

Once its store is open, a level settles the process's heap as the engine does (``--heap settled``,
:func:`m3.gateway.runtime.settle_heap`); ``--heap as-started`` leaves it as it was, and ``--heap both`` runs
every level both ways, as-started first, the settled row's ratios against it.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

from benchmarks.cache import CachingEmbedder
from benchmarks.data import default_data_dir, load_locomo, load_longmemeval
from benchmarks.embedding import cached_embedder, default_cache_path, describe, prewarm
from benchmarks.ingest import STORES, store_system
from benchmarks.latency import percentiles_ms, ratio
from benchmarks.report import RunDir, rows_text
from benchmarks.retrieval import int_list
from m3.gateway.registry import default_registry
from m3.gateway.runtime import settle_heap
from m3.gateway.service import CallContext, Service


def write_texts(data_dir: Path, n: int) -> list[str]:
    """``n`` distinct dataset texts (LoCoMo turns, then LongMemEval oracle turns)."""
    stacks = load_locomo(data_dir) + load_longmemeval(data_dir, "oracle")
    texts = list(dict.fromkeys(t.content for h in stacks for t in h.turns))
    if len(texts) < n:
        raise SystemExit(f"only {len(texts)} distinct texts available; ask for fewer writes")
    return texts[:n]


async def _writer(service: Service, texts: list[str], memory_type: str, latencies: list[float]) -> None:
    ctx = CallContext(agent_id="bench-writer")
    for text in texts:
        started = time.perf_counter()
        await service.call("memory_write", {"content": text, "type": memory_type}, ctx)
        latencies.append(time.perf_counter() - started)


async def _run_writers(service: Service, texts: list[str], writers: int, memory_type: str) -> list[float]:
    latencies: list[float] = []
    async with trio.open_nursery() as nursery:
        for w in range(writers):
            nursery.start_soon(_writer, service, texts[w::writers], memory_type, latencies)
    return latencies


def run_level(store: str, embedder: CachingEmbedder, texts: list[str], writers: int, memory_type: str,
              heap: str = "settled") -> dict[str, Any]:
    """One level on a new store: concurrent writes, then the wait until every vector is stored."""
    with store_system(store, embedder) as system:
        gc.unfreeze()  # what an earlier level settled
        if heap == "settled":
            settle_heap()
        service = Service(system.config, system, default_registry())
        started = time.perf_counter()
        latencies = trio.run(_run_writers, service, texts, writers, memory_type)
        elapsed = time.perf_counter() - started
        system.wait_embedded(3600.0)
        embedded = time.perf_counter() - started
    gc.unfreeze()  # the caller's heap as it was
    stats = percentiles_ms(latencies)
    return {"load": round(os.getloadavg()[0], 1), "heap": heap, "writers": writers, "writes": len(latencies),
            "writes_per_s": round(len(latencies) / elapsed, 1),
            "p50_ms": stats["p50_ms"], "p99_ms": stats["p99_ms"], "max_ms": stats["max_ms"],
            "all_embedded_s": round(embedded, 2)}


def add_ratios(rows: list[dict[str, Any]], *, per_level: bool = False) -> None:
    """Ratios against the first row, or (``per_level``) against the first row of the same writer count."""
    for row in rows:
        base = next(r for r in rows if r["writers"] == row["writers"]) if per_level else rows[0]
        row["throughput_x"] = ratio(row["writes_per_s"], base["writes_per_s"])
        row["p99_x"] = ratio(row["p99_ms"], base["p99_ms"])


def run_versions(args: argparse.Namespace, writers: int) -> list[dict[str, Any]]:
    """One level run by the baseline checkout and by this one, each in its own process (A/B), ``args.rounds``
    times: the baseline first in odd rounds, this checkout first in even ones (whichever runs second may find
    the machine warmer or busier)."""
    rows = []
    versions = (("before", args.baseline.resolve()), ("after", Path(__file__).resolve().parent.parent))
    for round_no in range(1, args.rounds + 1):
        done_in_round = []
        for version, root in (versions if round_no % 2 else versions[::-1]):
            level = _run_version(args, writers, root)
            done_in_round.append({"round": round_no, "version": version, **level})
        done_in_round.sort(key=lambda row: row["version"] != "before")
        base = done_in_round[0]
        for row in done_in_round:  # against the baseline's row of the same level and round
            for key, of in (("throughput_x", "writes_per_s"), ("p50_x", "p50_ms"), ("p99_x", "p99_ms")):
                row[key] = ratio(row[of], base[of])
        rows += done_in_round
    return rows


def _run_version(args: argparse.Namespace, writers: int, root: Path) -> dict[str, Any]:
    """One level in a subprocess of the checkout at ``root``: its summary row, the commit it ran, the load."""
    with tempfile.TemporaryDirectory(prefix="m3-perf-write-") as out:
        command = [sys.executable, "-m", "benchmarks.perf_write", "--writers", str(writers), "--writes",
                   str(args.writes), "--type", args.type, "--store", args.store, "--data", str(args.data),
                   "--cache", str(args.cache), "--out", out]
        subprocess.run(command, cwd=root, env={**os.environ, "PYTHONPATH": str(root)}, check=True,
                       stdout=subprocess.DEVNULL)
        [summary] = Path(out).glob("*/summary.json")
        done = json.loads(summary.read_text(encoding="utf-8"))
    code = done["code"] or {}
    level = {k: v for k, v in done["levels"][0].items() if not k.endswith("_x")}
    return {"commit": str(code.get("commit", "?"))[:9] + ("+" if code.get("modified") else ""), **level,
            "load": round(os.getloadavg()[0], 1)}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=default_data_dir())
    parser.add_argument("--cache", type=Path, default=default_cache_path())
    parser.add_argument("--writers", default="1,16,64", help="comma-separated concurrency levels")
    parser.add_argument("--writes", type=int, default=3000, help="writes per level")
    parser.add_argument("--type", default="note", help="memory type written (note: the tool's default)")
    parser.add_argument("--store", choices=STORES, default="sqlite")
    parser.add_argument("--baseline", type=Path, default=None,
                        help="another checkout of m3: run every level with it and with this one (A/B)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="with --baseline: run both versions this many times, alternating which goes first")
    parser.add_argument("--heap", choices=("settled", "as-started", "both"), default="settled",
                        help="settle the heap as the engine does, leave it as started, or run each level both ways")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    rows: list[dict[str, Any]] = []
    if args.baseline is not None:
        with RunDir("perf_write", args.out) as run:
            for writers in int_list(args.writers):
                for row in run_versions(args, writers):
                    rows.append(row)
                    run.log(row)
            summary = run.summary({"via": "gateway Service.call('memory_write') from trio tasks, A/B",
                                   "store": args.store, "memory_type": args.type, "levels": rows})
        print(rows_text(rows, f"{args.store} write acknowledgement, baseline vs this checkout ({run.path})"))
        print(f"runtime {summary['runtime_s']} s")
        return summary
    texts = write_texts(args.data, args.writes)
    embedder = cached_embedder(args.cache)
    prewarm(embedder, texts)
    with RunDir("perf_write", args.out) as run:
        heaps = ("as-started", "settled") if args.heap == "both" else (args.heap,)
        for writers in int_list(args.writers):
            for heap in heaps:
                rows.append(run_level(args.store, embedder, texts, writers, args.type, heap))
                run.log(rows[-1])
        add_ratios(rows, per_level=args.heap == "both")
        summary = run.summary({"via": "gateway Service.call('memory_write') from trio tasks",
                               "store": args.store, "memory_type": args.type, "embedder": describe(embedder),
                               "levels": rows})
    print(rows_text(rows, f"{args.store} write acknowledgement latency and throughput ({run.path})"))
    print(f"runtime {summary['runtime_s']} s")
    return summary


if __name__ == "__main__":
    main()
