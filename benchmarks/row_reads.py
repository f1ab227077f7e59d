"""Reading search candidates' rows: ``rows_by_ids`` of this checkout against another's, on one store.

``python -m benchmarks.row_reads --store sqlite --size 10000 [--baseline DIR] [--rounds 3]``: one new store
(or the filled store at ``--url``) holds ``size`` LongMemEval_S turns (``perf_search``'s fill) and is let
settle. The timed call is what a search does two or three times: the ranking columns of 100 candidates under
the default search filter (``m3.store.memories.rows_by_ids``), 300 times over random id sets, median in ms.
``--type T`` adds what ``memory_search(type=T)`` adds to that filter (the filled turns are of type
``conversation``).
With ``--baseline DIR`` (another checkout, e.g. ``git archive REV | tar -x -C DIR``) the same call of that
version runs in a subprocess on the same store, alternating with this checkout's ``--rounds`` times; the
rows both return are compared (the same values).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from benchmarks.checkouts import in_turn
from benchmarks.perf_search import kept_store_parser, on_filled_store

#: The timed loop, run by either checkout (it uses only what both have): prints the median ms and a digest.
PROBE = r"""
import hashlib, json, random, statistics, sys, time
from datetime import UTC, datetime
from m3.protocols.messages.memory import MemoryFilter
try:  # where the row readers live since 2026-12-05; before, in m3.store.memories
    from m3.store import id_reads as rows
except ImportError:
    from m3.store import memories as rows
from m3.store.engine import StoreOptions, open_engine
from m3.store.filters import search_clause
url, calls, memory_type = sys.argv[1], int(sys.argv[2]), sys.argv[3] or None
engine = open_engine(StoreOptions(url=url), "reader")
with engine.connect() as conn:
    every = [r[0] for r in conn.exec_driver_sql("SELECT id FROM memories ORDER BY id")]
    clause = search_clause(MemoryFilter(type=memory_type), datetime.now(UTC))
    pick = random.Random(7)
    sets = [pick.sample(every, min(100, len(every))) for _ in range(calls)]
    digest = hashlib.sha256()
    for ids in sets[:5]:  # warm, and what both versions must agree on
        found = rows.rows_by_ids(conn, ids, clause, columns=rows.RANKING_COLUMNS)
        digest.update(repr(sorted((k, sorted(v.items())) for k, v in found.items())).encode())
    took = []
    for ids in sets:
        started = time.perf_counter()
        rows.rows_by_ids(conn, ids, clause, columns=rows.RANKING_COLUMNS)
        took.append((time.perf_counter() - started) * 1000)
engine.dispose()
print(json.dumps({"median_ms": statistics.median(took), "digest": digest.hexdigest()}))
"""


def measure(url: str, work: Path, args: argparse.Namespace) -> list[dict[str, Any]]:
    runs = in_turn(args.baseline, args.rounds, PROBE, url, str(args.calls), args.type or "")
    digests = {run["digest"] for found in runs.values() for run in found}
    first = next(iter(runs.values()))
    return [{"version": name, "store": args.store, "type": args.type,
             "rounds_median_ms": [round(r["median_ms"], 3) for r in found],
             "x": [round(r["median_ms"] / b["median_ms"], 3) for r, b in zip(found, first, strict=True)],
             "same_rows": len(digests) == 1} for name, found in runs.items()]


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = kept_store_parser(__doc__.splitlines()[0], size=10_000, store="sqlite")
    parser.add_argument("--baseline", type=Path, default=None, help="another checkout, timed in turn with this one")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--type", default=None, help="filter on this memory type, as memory_search(type=...)")
    args = parser.parse_args(argv)
    return on_filled_store(args, args.store, measure,
                           f"rows_by_ids of 100 candidates, {args.store}, {args.size} memories"
                           + (f", type={args.type}" if args.type else ""))


if __name__ == "__main__":
    main()
