"""How long one full garbage collection stops an engine-like process, as started and once its heap is settled.

``python -m benchmarks.gc_pauses --size 100000 [--searches 30] [--collections 5] [--url URL] [--store S]``:
one new store (or the filled store at ``--url``) holds ``size`` distinct LongMemEval_S turns (``perf_search``'s
fill). An ActorSystem starts on it as the engine's does; ``searches`` questions are asked through the Searcher
(which loads the store's vectors), then ``collections`` full collections (``gc.collect()``) are timed: every
thread of the process waits while one runs. Then the heap is settled as a long-lived m3 process settles it
(:func:`m3.gateway.runtime.settle_heap`), the same questions asked again, and the collections timed again.
Prints both arms' median and maximum ms, the objects the collector tracks, and the ratio of the medians.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from pathlib import Path
from typing import Any

from benchmarks.embedding import cached_embedder
from benchmarks.ingest import bench_config
from benchmarks.perf_search import corpus, kept_store_parser, on_filled_store
from benchmarks.precomputed import PrecomputedEmbedder
from m3.actors.system import ActorSystem
from m3.gateway.runtime import settle_heap
from m3.protocols.messages.memory import MemoryFilter, SearchMemories


def _arm(system: ActorSystem, arm: str, queries: list[str], collections: int) -> dict[str, Any]:
    for query in queries:
        system.searcher.ask(SearchMemories(query=query, k=8, filter=MemoryFilter()), timeout=600.0)
    pauses = []
    for _ in range(collections):
        started = time.perf_counter()
        gc.collect()
        pauses.append((time.perf_counter() - started) * 1000)
    return {"arm": arm, "collections": collections, "median_ms": round(statistics.median(pauses), 2),
            "max_ms": round(max(pauses), 2), "tracked_objects": len(gc.get_objects())}


def measure(url: str, work: Path, args: argparse.Namespace) -> list[dict[str, Any]]:
    _, queries = corpus(args.data, 1, args.searches)
    embedder = PrecomputedEmbedder(cached_embedder(args.cache, 1))
    config = bench_config(work / "gc").with_overrides(store__url=url, actors__ask_timeout_s=3600.0)
    gc.unfreeze()
    system = ActorSystem(config, embedder).start()
    try:
        rows = [_arm(system, "as started", queries, args.collections)]
        settle_heap()
        rows.append(_arm(system, "settled", queries, args.collections))
    finally:
        system.stop(drain_embeddings=False)
        gc.unfreeze()
    for row in rows:
        row["median_x"] = round(row["median_ms"] / rows[0]["median_ms"], 3)
    return rows


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = kept_store_parser(__doc__.splitlines()[0], size=100_000, store="sqlite")
    parser.add_argument("--searches", type=int, default=30)
    parser.add_argument("--collections", type=int, default=5)
    args = parser.parse_args(argv)
    return on_filled_store(args, args.store, measure,
                           f"full garbage collections, {args.store}, {args.size} memories")


if __name__ == "__main__":
    main()
