"""Search latency on one kept store: the same memories and questions for two versions of m3.

``python -m benchmarks.perf_search_ab fill --store DIR --size 20000`` fills a
SQLite store under ``DIR`` as ``perf_search`` does (LongMemEval_S turns
through the Writer, vectors through the Embedder actor, from the embedding
cache or pseudo-random) and keeps it. ``python -m benchmarks.perf_search_ab
search --store DIR`` times the default search (``m3`` mode, k=10) on it,
unfiltered and restricted to one conversation, with every query vector
taken from the embedding cache (so the model's time is left out: what is
compared is m3's own work). Run ``search`` from each version's checkout in
turn, alternating, on copies of the store (a newer version may migrate it),
to compare them under the same load.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from benchmarks.data import default_data_dir
from benchmarks.embedding import cached_embedder, default_cache_path, describe
from benchmarks.ingest import bench_config
from benchmarks.latency import percentiles_ms
from benchmarks.modes import SearchModes
from benchmarks.perf_search import WARMUP_QUERIES, corpus, fill
from benchmarks.perf_search_stores import time_filtered
from benchmarks.precomputed import PrecomputedEmbedder
from benchmarks.report import RunDir, rows_text
from m3.actors.system import ActorSystem
from m3.protocols.messages.memory import MemoryFilter, SearchMemories


def search_row(searchers: SearchModes, queries: list[str], sessions: list[str], k: int) -> dict[str, Any]:
    handle, timeout = searchers.handles["m3"], searchers.system.ask_timeout
    for query in queries[:WARMUP_QUERIES]:
        handle.ask(SearchMemories(query=query, k=k, filter=MemoryFilter()), timeout)
    latencies = []
    for query in queries:
        started = time.perf_counter()
        handle.ask(SearchMemories(query=query, k=k, filter=MemoryFilter()), timeout)
        latencies.append(time.perf_counter() - started)
    plain, filtered = percentiles_ms(latencies), time_filtered(searchers, queries, sessions, k)
    return {"m3_p50": plain["p50_ms"], "m3_p95": plain["p95_ms"],
            "m3_filtered_p50": filtered["p50_ms"], "m3_filtered_p95": filtered["p95_ms"]}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["fill", "search"])
    parser.add_argument("--store", type=Path, required=True, help="folder holding the kept store (m3.db)")
    parser.add_argument("--size", type=int, default=20_000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--source", choices=["s", "oracle"], default="s", help="LongMemEval split giving the texts")
    parser.add_argument("--data", type=Path, default=default_data_dir())
    parser.add_argument("--cache", type=Path, default=default_cache_path())
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    turns, queries = corpus(args.data, args.size, args.queries, args.source)
    cache = cached_embedder(args.cache)
    args.store.mkdir(parents=True, exist_ok=True)
    with RunDir(f"perf_search_ab-{args.action}", args.out) as run:
        system = ActorSystem(bench_config(args.store), PrecomputedEmbedder(cache)).start()
        try:
            if args.action == "fill":
                row: dict[str, Any] = {"memories": args.size, "fill_s": round(fill(system, turns), 1)}
            else:
                cache.embed(queries)  # every query vector cached before timing
                searchers = SearchModes(system, ["m3"], embedder=cache)
                sessions = [turns[(i * 7919) % len(turns)].session_id for i in range(len(queries))]
                try:
                    row = {"memories": args.size, **search_row(searchers, queries, sessions, args.k)}
                finally:
                    searchers.stop()
        finally:
            system.stop(drain_embeddings=False)
        run.log(row)
        summary = run.summary({"store": str(args.store), "action": args.action, "k": args.k,
                               "queries": len(queries), "embedder": describe(cache), "row": row})
    print(rows_text([row], f"{args.action} ({run.path})"))
    return summary


if __name__ == "__main__":
    main()
