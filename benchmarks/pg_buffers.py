"""PostgreSQL search with m3's ``shared_buffers`` against PostgreSQL's 128 MB, the server restarted between rounds.

``python -m benchmarks.pg_buffers --size 100000 [--queries 300] [--rounds 2] [--url URL --pgdata DIR --socket DIR]``:
one new embedded PostgreSQL store (or the kept store at ``--url``, whose cluster lives in ``--pgdata`` with its
socket in ``--socket``) holds ``size`` distinct LongMemEval_S turns (``perf_search``'s fill, vectors from the
embedding cache) and is let settle. Then, ``rounds`` times, for PostgreSQL's default (128 MB) and for m3's
(``embedded_pg.default_settings``) in turn: the server is restarted with that ``shared_buffers``, a new Searcher
answers the questions once to warm the buffers and once timed (query vectors from the cache, k = 10). A setting
cannot change inside one server, so the arms alternate by round instead of by question; the operating
system's file cache is warm for both. Prints each round's p50/p95 and the ratio of the arms' median p50s.
The server is left running with m3's setting.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

from benchmarks.embedding import cached_embedder
from benchmarks.interleaved import live_searcher
from benchmarks.latency import percentiles_ms
from benchmarks.perf_search import corpus, kept_store_parser, on_filled_store
from benchmarks.precomputed import PrecomputedEmbedder
from m3.protocols.messages.memory import MemoryFilter, SearchMemories
from m3.store import embedded_pg

POSTGRES_DEFAULT = "128MB"


def _round(url: str, work: Path, queries: list[str], embedder: PrecomputedEmbedder) -> list[float]:
    searcher = live_searcher(url, work, embedder)
    try:
        latencies = []
        for timed in (False, True):
            for query in queries:
                started = time.perf_counter()
                with searcher.conn.begin():
                    searcher.search(SearchMemories(query=query, k=10, filter=MemoryFilter()))
                if timed:
                    latencies.append(time.perf_counter() - started)
        return latencies
    finally:
        searcher.release()


def measure(url: str, work: Path, args: argparse.Namespace) -> list[dict[str, Any]]:
    pgdata = args.pgdata or work / "pg" / "data"
    socket = args.socket or work / "pg" / "run"
    _, queries = corpus(args.data, 1, args.queries)
    embedder = PrecomputedEmbedder(cached_embedder(args.cache, 1))
    arms = {"postgres default": POSTGRES_DEFAULT, "m3 default": embedded_pg.default_settings()["shared_buffers"]}
    rows: list[dict[str, Any]] = []
    try:
        for n in range(args.rounds):
            for arm, buffers in arms.items():
                embedded_pg.stop(pgdata)
                embedded_pg.ensure_cluster(pgdata, socket, settings={"shared_buffers": buffers})
                rows.append({"arm": arm, "shared_buffers": buffers, "round": n + 1,
                             **percentiles_ms(_round(url, work, queries, embedder))})
    finally:
        embedded_pg.stop(pgdata)
        embedded_pg.ensure_cluster(pgdata, socket)
    base = statistics.median(r["p50_ms"] for r in rows if r["arm"] == "postgres default")
    for row in rows:
        row["p50_x"] = round(row["p50_ms"] / base, 3)
    return rows


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = kept_store_parser(__doc__.splitlines()[0], size=100_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--pgdata", type=Path, default=None, help="the kept store's cluster (with --url)")
    parser.add_argument("--socket", type=Path, default=None, help="its socket directory (with --url)")
    args = parser.parse_args(argv)
    if args.url is not None and (args.pgdata is None or args.socket is None):
        parser.error("--url needs --pgdata and --socket: the benchmark restarts that cluster")
    return on_filled_store(args, "postgres", measure, f"shared_buffers, PostgreSQL, {args.size} memories")


if __name__ == "__main__":
    main()
