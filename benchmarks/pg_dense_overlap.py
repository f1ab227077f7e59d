"""PostgreSQL search with the dense leg's statement on a second connection, against one connection, interleaved.

``python -m benchmarks.pg_dense_overlap --size 100000 [--queries 300] [--live] [--url URL]``: one new embedded
PostgreSQL store (or the filled store at ``--url``) is filled with ``size`` distinct LongMemEval_S turns
(``perf_search``'s fill, vectors from the embedding cache) and let settle (``ANALYZE`` included). One Searcher
then answers each question twice, once with its dense leg proposing on a second connection (the default: the
HNSW statement runs on the query embedding's thread while the Searcher's connection runs the keyword leg) and
once on the Searcher's connection alone, alternating which goes first; both on the same store, in one
process, so the machine's drift touches both alike. Query vectors come from the embedding cache unless
``--live`` (then each search embeds its query with the MiniLM model, one onnxruntime thread). Prints p50/p95
of each and the ratio of the medians (two connections ÷ one), and the same for the questions that name a time
(``timed_*``: their time leg runs too, on the second connection as well).
"""

from __future__ import annotations

import argparse
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.embedding import cached_embedder
from benchmarks.ingest import bench_config
from benchmarks.latency import percentiles_ms
from benchmarks.perf_search import corpus, kept_store_parser, on_filled_store
from benchmarks.precomputed import PrecomputedEmbedder
from m3.actors.searcher import Searcher
from m3.actors.system import search_weights, store_options
from m3.protocols.messages.memory import MemoryFilter, SearchMemories
from m3.retrieval import timewords
from m3.retrieval.dense import leg_for
from m3.store.dialect import dialect_for

WARMUP = 10


def measure(url: str, work: Path, args: argparse.Namespace) -> list[dict[str, Any]]:
    _, queries = corpus(args.data, 1, args.queries + WARMUP)
    warm = min(WARMUP, len(queries) // 2)  # a small data set has fewer questions than asked
    cache = cached_embedder(args.cache, 1)
    config = bench_config(work).with_overrides(store__url=url)
    searcher = Searcher(store_options(config), embedder=cache.inner if args.live else PrecomputedEmbedder(cache),
                        weights=search_weights(config), candidates=config["search.candidates"], writer=None,
                        stats=None, on_crash=None)
    searcher.setup()
    try:
        legs = {"two connections": leg_for(dialect_for(url), searcher._side_connection),
                "one connection": leg_for(dialect_for(url))}
        latencies: dict[str, list[float]] = {name: [] for name in legs}
        timed: dict[str, list[float]] = {name: [] for name in legs}
        for i, query in enumerate(queries):
            for name in sorted(legs, reverse=i % 2 == 1):
                searcher._dense = legs[name]
                started = time.perf_counter()
                with searcher.conn.begin():
                    searcher.search(SearchMemories(query=query, k=10, filter=MemoryFilter()))
                if i >= warm:
                    latencies[name].append(time.perf_counter() - started)
                    if timewords.windows(query, datetime.now(UTC)):
                        timed[name].append(latencies[name][-1])
    finally:
        searcher.release()
    base = statistics.median(latencies["one connection"])
    rows = []
    for name, v in latencies.items():
        named = percentiles_ms(timed[name])
        rows.append({"dense leg": name, "queries": len(v), **percentiles_ms(v),
                     "p50_x": round(statistics.median(v) / base, 3), "timed_n": len(timed[name]),
                     "timed_p50_ms": named["p50_ms"], "timed_p95_ms": named["p95_ms"],
                     "query_vectors": "live" if args.live else "cached"})
    return rows


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = kept_store_parser(__doc__.splitlines()[0], size=100_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--live", action="store_true", help="embed each query with the model (default: cached)")
    args = parser.parse_args(argv)
    return on_filled_store(args, "postgres", measure,
                           f"PostgreSQL search, dense leg on one or two connections ({args.size} memories)")


if __name__ == "__main__":
    main()
