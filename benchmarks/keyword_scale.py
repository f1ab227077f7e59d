"""The keyword leg on a large store: its latency, the whole search's, and what both find, for two versions.

``python -m benchmarks.keyword_scale --size 100000 --store postgres [--baseline DIR]``: one new store (SQLite
file or embedded PostgreSQL) is filled with ``size`` distinct LongMemEval_S turns through m3's write path
(as ``perf_search`` does; vectors from the embedding cache) and let settle (on PostgreSQL, ``ANALYZE`` too:
what autovacuum does within a minute of the fill). Then, on that same store, each
version measures (with ``--baseline``: the baseline checkout's code first, then this checkout's, each in its
own process, so the store and the questions are the same):

* ``keyword_p50``: the keyword leg alone (the dialect's ``memory_hits``, 100 candidates, default filter) over
  the first ``--queries`` questions, each in its own read transaction;
* ``search_p50``, ``search_p95``: the whole default search (``m3`` mode, k = 10) through a Searcher actor,
  every query vector taken from the embedding cache, so the model's time is left out;
* ``m3_hit@k`` and ``bm25_hit@k``: over every LongMemEval_S question whose evidence session has turns in the
  store, the share whose top k (k = 1, 5, 10) holds a turn of an evidence session, asked at the question's
  date; ``bm25`` is the keyword signal alone (``benchmarks.modes``). This is a needle in a store of ``size``
  turns of many users' sessions, so the rates are far below the per-haystack benchmarks'; what matters is
  the comparison.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import select

from benchmarks.data import Question, default_data_dir, load_longmemeval
from benchmarks.embedding import cached_embedder, default_cache_path
from benchmarks.ingest import bench_config, store_url
from benchmarks.latency import percentiles_ms
from benchmarks.modes import SearchModes
from benchmarks.perf_search import corpus, fill, settle
from benchmarks.precomputed import PrecomputedEmbedder
from benchmarks.report import rows_text
from m3.actors.system import ActorSystem
from m3.protocols.messages.memory import MemoryFilter
from m3.store.dialect import dialect_for
from m3.store.engine import StoreOptions, open_engine
from m3.store.filters import search_clause
from m3.store.schema import memories

KS = (1, 5, 10)
CANDIDATES = 100


def answerable(data: Path, sessions: set[str]) -> list[Question]:
    """LongMemEval_S questions (once each) with an evidence session in ``sessions``."""
    found: dict[str, Question] = {}
    for haystack in load_longmemeval(data, "s"):
        for q in haystack.questions:
            if q.gold_sessions & sessions:
                found.setdefault(q.qid, q)
    return list(found.values())


def keyword_leg(url: str, queries: list[str]) -> tuple[dict[str, float], dict[str, str]]:
    """The keyword leg's p50 and mean hits over ``queries``, and every memory's conversation (session)."""
    engine = open_engine(StoreOptions(url=url), "reader")
    latencies, hits = [], 0
    try:
        with engine.connect() as conn:
            for query in queries:
                with conn.begin():
                    started = time.perf_counter()
                    clause = search_clause(MemoryFilter(), datetime.now(UTC))
                    hits += len(dialect_for(conn).memory_hits(conn, query, clause, CANDIDATES, selective=False))
                    latencies.append(time.perf_counter() - started)
            with conn.begin():
                sessions = {str(i): str(c) for i, c in conn.execute(select(memories.c.id, memories.c.conversation_id))}
    finally:
        engine.dispose()
    return {"keyword_p50": percentiles_ms(latencies)["p50_ms"], "keyword_hits": round(hits / len(queries), 1)}, sessions


def hit_rates(searchers: SearchModes, mode: str, questions: list[Question], session_of: dict[str, str]
              ) -> dict[str, float]:
    ranks = []
    for q in questions:
        ids = [h.id for h in searchers.search(mode, q.text, max(KS), q.date)]
        ranks.append(next((r for r, i in enumerate(ids, 1) if session_of.get(i) in q.gold_sessions), None))
    return {f"{mode}_hit@{k}": round(sum(1 for r in ranks if r is not None and r <= k) / len(ranks), 4) for k in KS}


def measure(url: str, args: argparse.Namespace) -> dict[str, Any]:
    _, queries = corpus(args.data, 1, args.queries)
    keyword, session_of = keyword_leg(url, queries)
    questions = answerable(args.data, set(session_of.values()))
    cache = cached_embedder(args.cache, 1)
    cache.embed(queries + [q.text for q in questions])  # every query vector cached before timing
    root = Path(args.work)
    system = ActorSystem(bench_config(root).with_overrides(store__url=url, actors__ask_timeout_s=3600.0),
                         PrecomputedEmbedder(cache)).start()
    try:
        searchers = SearchModes(system, ["m3", "bm25"], embedder=cache)
        try:
            for query in queries[:3]:
                searchers.search("m3", query, 10)
            latencies = []
            for query in queries:
                started = time.perf_counter()
                searchers.search("m3", query, 10)
                latencies.append(time.perf_counter() - started)
            timed = percentiles_ms(latencies)
            row = {"load": round(os.getloadavg()[0], 1), **keyword, "search_p50": timed["p50_ms"],
                   "search_p95": timed["p95_ms"], "questions": len(questions)}
            for mode in ("m3", "bm25"):
                row.update(hit_rates(searchers, mode, questions, session_of))
        finally:
            searchers.stop()
    finally:
        system.stop(drain_embeddings=False)
    return row


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=default_data_dir())
    parser.add_argument("--cache", type=Path, default=default_cache_path())
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--store", choices=["sqlite", "postgres"], default="postgres")
    parser.add_argument("--baseline", type=Path, default=None, help="another checkout of m3 to compare with")
    parser.add_argument("--url", default=None, help="measure on this filled store (used by --baseline)")
    parser.add_argument("--work", default=None, help="a folder for the measuring process's files (with --url)")
    parser.add_argument("--json", action="store_true", help="print one JSON row (used by --baseline)")
    args = parser.parse_args(argv)
    rows = [measure(args.url, args)] if args.url is not None else fill_and_measure(args)
    if args.json:
        print(json.dumps(rows[0]))
    else:
        print(rows_text(rows, f"Keyword leg and search on {args.size} memories ({args.store})"))
    return rows


def fill_and_measure(args: argparse.Namespace) -> list[dict[str, Any]]:
    turns, _ = corpus(args.data, args.size, 1)
    with tempfile.TemporaryDirectory(prefix="m3-keyword-scale-") as tmp, store_url(args.store, Path(tmp)) as url:
        config = bench_config(Path(tmp)).with_overrides(store__url=url, actors__ask_timeout_s=3600.0)
        system = ActorSystem(config, PrecomputedEmbedder(cached_embedder(args.cache, 1))).start()
        try:
            fill_s = fill(system, turns)
            settle_s, _ = settle(system)  # on PostgreSQL this checkout's settle analyzes the store too
        finally:
            system.stop(drain_embeddings=False)
        common = ["--url", url, "--work", tmp, "--queries", str(args.queries), "--data", str(args.data),
                  "--cache", str(args.cache)]
        if args.baseline is None:
            rows = [measure(url, argparse.Namespace(**{**vars(args), "url": url, "work": tmp}))]
        else:
            from benchmarks.versions import add_ratios, run_versions  # parent process only (see benchmarks.versions)

            rows = run_versions(Path(__file__), args.baseline, common)
            add_ratios(rows, ("keyword_p50", "search_p50", "search_p95"))
    for row in rows:
        row.update(memories=args.size, fill_s=round(fill_s, 1), settle_s=round(settle_s, 1))
    return rows


if __name__ == "__main__":
    main()
