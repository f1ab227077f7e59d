"""Lookups of memories by their successor (``superseded_by``) with and without migration 0015's index.

``python -m benchmarks.successor_index --size 100000 [--lookups 200] [--rounds 3] [--url URL]``: one new
SQLite store (or the kept store at ``--url``, migrated to the newest revision) holds ``size`` distinct
LongMemEval_S turns (``perf_search``'s fill). Then, ``rounds`` times, without the index and with it in turn
(the arms alternate by round: an index is there for every statement or for none), ``lookups`` random current
memories each get the two statements that look rows up by their successor:

* ``version_chain`` (``memory_get``/``memory_history``, and the Writer when it checks a chain), and
* the statement by which ``memory_update``'s kept copy takes the row's place in its chain (the same lookup a
  hard delete runs), inside a transaction that is rolled back.

Prints each round's p50/p95 per statement and the ratio of the arms' median p50s. The index is there again
when the benchmark ends.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, select, update

from benchmarks.latency import percentiles_ms
from benchmarks.perf_search import kept_store_parser, on_filled_store
from m3.store import memories as rows
from m3.store.engine import StoreOptions, migrate, open_engine
from m3.store.schema import memories as m

INDEX = "ix_memories_superseded_by"
CREATE = f"CREATE INDEX IF NOT EXISTS {INDEX} ON memories (superseded_by) WHERE superseded_by IS NOT NULL"


def _timed(conn: Connection, ids: list[str]) -> dict[str, list[float]]:
    chain, relink = [], []
    for memory_id in ids:
        with conn.begin() as tx:
            started = time.perf_counter()
            rows.version_chain(conn, memory_id)
            chain.append(time.perf_counter() - started)
            tx.rollback()
        with conn.begin() as tx:
            started = time.perf_counter()
            conn.execute(update(m).where(m.c.superseded_by == memory_id, m.c.id != "copy").values(
                superseded_by="copy"))
            relink.append(time.perf_counter() - started)
            tx.rollback()
    return {"version_chain": chain, "update_relink": relink}


def measure(url: str, work: Path, args: argparse.Namespace) -> list[dict[str, Any]]:
    engine = open_engine(StoreOptions(url=url), "writer")
    try:
        migrate(engine)
        with engine.connect() as conn:
            current = [r[0] for r in conn.execute(select(m.c.id).where(m.c.retired_at.is_(None)))]
            conn.rollback()
            ids = random.Random(7).sample(current, min(args.lookups, len(current)))
            found: list[dict[str, Any]] = []
            for n in range(args.rounds):
                for arm in ("no index", "index"):
                    conn.exec_driver_sql(CREATE if arm == "index" else f"DROP INDEX IF EXISTS {INDEX}")
                    conn.commit()
                    _timed(conn, ids[:10])  # warm the pages either arm reads
                    for statement, latencies in _timed(conn, ids).items():
                        found.append({"arm": arm, "round": n + 1, "statement": statement,
                                      **percentiles_ms(latencies)})
            conn.exec_driver_sql(CREATE)
            conn.commit()
    finally:
        engine.dispose()
    for statement in ("version_chain", "update_relink"):
        base = statistics.median(r["p50_ms"] for r in found if r["arm"] == "no index" and r["statement"] == statement)
        for row in found:
            if row["statement"] == statement:
                row["p50_x"] = round(row["p50_ms"] / base, 4)
    return found


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = kept_store_parser(__doc__.splitlines()[0], size=100_000)
    parser.add_argument("--lookups", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    return on_filled_store(args, "sqlite", measure, f"lookups by successor, SQLite, {args.size} memories")


if __name__ == "__main__":
    main()
