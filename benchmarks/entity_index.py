"""Entity indexing: memories indexed per second, and the Writer's share of it.

``python -m benchmarks.entity_index [--memories 3000] [--store postgres] [--baseline DIR]``: a new store
is filled with distinct LongMemEval_S turns through the Writer (``entities.enabled`` off, so nothing is
indexed meanwhile; vectors from the embedding cache), then the entity pass is run over the whole backlog
(``ExtractEntities``: the pass the background runs every ``entities.interval_s``, ``entities.batch``
memories at a time) and timed. ``writer_cpu_s`` is the CPU the Writer's thread spent in the transactions
that stored the entities (``IndexEntities``): time during which acknowledged writes wait behind them.

With ``--baseline DIR`` (another checkout) the same run is made first with that checkout's m3, then with
this one, each in its own process; ratios compare the two.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.data import default_data_dir
from benchmarks.embedding import cached_embedder, default_cache_path
from benchmarks.ingest import bench_config, store_url
from benchmarks.perf_search import corpus, fill
from benchmarks.precomputed import PrecomputedEmbedder
from benchmarks.report import rows_text
from m3.actors import writer as writer_module
from m3.actors.system import ActorSystem
from m3.protocols.messages.entities import ExtractEntities, IndexEntities


def measure(store: str, data: Path, cache: Path, memories: int) -> dict[str, Any]:
    turns, _ = corpus(data, memories, 1)
    writer_cpu = [0.0]
    original = writer_module.Writer._commit

    def timed(self: Any, batch: list[Any]) -> None:
        if not any(isinstance(env.message, IndexEntities) for env in batch):
            return original(self, batch)
        began = time.thread_time()
        try:
            return original(self, batch)
        finally:
            writer_cpu[0] += time.thread_time() - began

    writer_module.Writer._commit = timed  # type: ignore[method-assign]
    try:
        with tempfile.TemporaryDirectory(prefix="m3-bench-entities-") as tmp, store_url(store, Path(tmp)) as url:
            config = bench_config(Path(tmp)).with_overrides(store__url=url, entities__enabled=False,
                                                            actors__ask_timeout_s=3600.0)
            system = ActorSystem(config, PrecomputedEmbedder(cached_embedder(cache))).start()
            try:
                fill(system, turns)
                began = time.perf_counter()
                done = system.entities.ask(ExtractEntities(limit=None), 3600.0)
                took = time.perf_counter() - began
            finally:
                system.stop(drain_embeddings=False)
    finally:
        writer_module.Writer._commit = original  # type: ignore[method-assign]
    return {"store": store, "memories": done.memories, "mentions": done.mentions, "entities": done.entities_created,
            "load": round(os.getloadavg()[0], 1), "index_s": round(took, 2),
            "memories_per_s": round(done.memories / took, 1), "writer_cpu_s": round(writer_cpu[0], 4)}


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=default_data_dir())
    parser.add_argument("--cache", type=Path, default=default_cache_path())
    parser.add_argument("--memories", type=int, default=3000)
    parser.add_argument("--store", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--baseline", type=Path, default=None, help="another checkout of m3 to compare with")
    parser.add_argument("--json", action="store_true", help="print one JSON row (used by --baseline)")
    args = parser.parse_args(argv)
    if args.baseline is None:
        rows = [measure(args.store, args.data, args.cache, args.memories)]
    else:
        from benchmarks.versions import add_ratios, run_versions  # parent process only (see benchmarks.versions)

        rows = run_versions(Path(__file__), args.baseline, ["--store", args.store, "--memories", str(args.memories),
                                                            "--data", str(args.data), "--cache", str(args.cache)])
        add_ratios(rows, ("index_s", "memories_per_s", "writer_cpu_s"))
    if args.json:
        print(json.dumps(rows[0]))
    else:
        print(rows_text(rows, "Entity indexing of the whole backlog"))
    return rows


if __name__ == "__main__":
    main()
