"""The embedding backlog's count (the dashboard's health page, ``admin_embedding_backlog``): in indexes, against
row by row.

``python -m benchmarks.backlog_count --size 100000 [--rounds 5] [--url URL] [--store S]``: one new store (or the
filled store at ``--url``) holds ``size`` distinct LongMemEval_S turns (``perf_search``'s fill) with their
vectors. Each round times, in turn, ``maintenance.backlog`` for the active model (the counts from indexes; no
walk for the oldest waiting when none waits) and the statements it ran before (every current memory probed for
a vector, then the walk from the oldest memory for the first waiting ones), and checks both count the same.
Prints each arm's median ms and the ratio.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, func, select

from benchmarks.perf_search import kept_store_parser, on_filled_store
from m3.store import maintenance
from m3.store.engine import StoreOptions, open_engine
from m3.store.schema import memories as m
from m3.store.schema import memory_embeddings as e


def row_by_row(conn: Connection, model: str, limit: int) -> int:
    """The backlog's count and oldest waiting, as ``maintenance.backlog`` read them before."""
    waiting = (m.c.retired_at.is_(None),
               ~select(e.c.memory_id).where(e.c.model == model, e.c.memory_id == m.c.id).exists())
    count = int(conn.execute(select(func.count()).select_from(m).where(*waiting)).scalar_one())
    conn.execute(select(m.c.id, m.c.recorded_at).where(*waiting).order_by(m.c.seq).limit(limit)).all()
    return count


def measure(url: str, work: Path, args: argparse.Namespace) -> list[dict[str, Any]]:
    engine = open_engine(StoreOptions(url=url), "reader")
    try:
        with engine.connect() as conn:
            model = str(conn.execute(select(e.c.model).limit(1)).scalar_one())
            took: dict[str, list[float]] = {"in indexes": [], "row by row": []}
            counts: set[int] = set()
            for _ in range(args.rounds + 1):  # the first round warms the pages, not timed
                for arm, times in took.items():
                    started = time.perf_counter()
                    if arm == "in indexes":
                        counts.add(maintenance.backlog(conn, [model], 10)[0]["pending"])
                    else:
                        counts.add(row_by_row(conn, model, 10))
                    times.append((time.perf_counter() - started) * 1000)
            conn.rollback()
    finally:
        engine.dispose()
    base = statistics.median(took["row by row"][1:])
    return [{"arm": arm, "model": model, "rounds": args.rounds, "median_ms": round(statistics.median(v[1:]), 2),
             "x": round(statistics.median(v[1:]) / base, 3), "same_count": len(counts) == 1}
            for arm, v in took.items()]


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = kept_store_parser(__doc__.splitlines()[0], size=100_000, store="sqlite")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    return on_filled_store(args, args.store, measure, f"embedding backlog, {args.store}, {args.size} memories")


if __name__ == "__main__":
    main()
