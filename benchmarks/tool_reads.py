"""Reads of the tools that browse rather than search (``entity_search``, ``entity_list``, ``entity_get``'s
summary, ``memory_stats``): this checkout against another's, on one store.

``python -m benchmarks.tool_reads --size 100000 [--store S] [--url URL] [--baseline DIR] [--rounds 3]``: one
new store (or the filled store at ``--url``) holds ``size`` LongMemEval_S turns (``perf_search``'s fill) whose
entities the settle pass indexed. Each read runs as the EntityIndexer runs it, on a reader connection with the
default filter, over the same inputs for both versions: ``entity_search`` of 20 names (four-letter prefixes of
entities picked at random), ``entity_list`` pages (the first 50, the first 50 names, 50 after the first 200),
the summary of 20 entities picked at random (what ``entity_get`` counts), and ``memory_stats`` as the local
user and as an isolated agent. With ``--baseline DIR`` (another
checkout, e.g. ``git archive REV | tar -x -C DIR``) that version's functions run in a subprocess in turn with
this checkout's, ``--rounds`` times; what both return is compared (a digest of every answer).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from benchmarks.checkouts import in_turn
from benchmarks.perf_search import kept_store_parser, on_filled_store

#: The timed reads, run by either checkout: prints each read's median ms and one digest of every answer.
PROBE = r"""
import hashlib, json, random, statistics, sys, time
from datetime import UTC, datetime
from m3.protocols.messages.listing import CountMemories
from m3.protocols.messages.memory import MemoryFilter
from m3.store import entities
from m3.store.memory_lists import count_memories
from m3.store.engine import StoreOptions, open_engine
try:
    from m3.store.entity_lists import list_entities
except ImportError:  # before entity_list had a module of its own
    list_entities = entities.list_entities
url, calls = sys.argv[1], int(sys.argv[2])
engine = open_engine(StoreOptions(url=url), "reader")
flt = MemoryFilter()
now = datetime(2030, 1, 1, tzinfo=UTC)  # one time for both versions: the same answers
with engine.connect() as conn:
    every = [tuple(r) for r in conn.exec_driver_sql("SELECT id, norm FROM entities ORDER BY id")]
    pick = random.Random(7).sample(every, min(20, len(every)))
    reads = {
        "entity_search": [lambda p=norm[:4]: entities.search(conn, p, None, 10, flt) for _, norm in pick],
        "entity_list": [lambda: list_entities(conn, None, 50, 0, flt), lambda: list_entities(conn, "name", 50, 0, flt),
                        lambda: list_entities(conn, None, 50, 200, flt)],
        "entity_summary": [lambda i=entity_id: entities.summaries(conn, [i], flt) for entity_id, _ in pick],
        "memory_stats": [lambda f=f: count_memories(conn, CountMemories(filter=f), now).model_dump()
                         for f in (flt, MemoryFilter(enforce_isolation=True, reader_agent_id="agent-x"))],
    }
    digest, out = hashlib.sha256(), {}
    for name, calls_of in reads.items():
        for call in calls_of:  # warm, and what both versions must agree on
            digest.update(json.dumps(call(), sort_keys=True, default=str).encode())
        took = []
        for _ in range(calls):
            for call in calls_of:
                started = time.perf_counter()
                call()
                took.append((time.perf_counter() - started) * 1000)
        out[name] = statistics.median(took)
engine.dispose()
print(json.dumps({"median_ms": out, "digest": digest.hexdigest()}))
"""


def measure(url: str, work: Path, args: argparse.Namespace) -> list[dict[str, Any]]:
    runs = in_turn(args.baseline, args.rounds, PROBE, url, str(args.calls))
    same = len({run["digest"] for found in runs.values() for run in found}) == 1
    first = next(iter(runs.values()))
    rows = []
    for name, found in runs.items():
        for read in found[0]["median_ms"]:
            medians = [run["median_ms"][read] for run in found]
            rows.append({"version": name, "store": args.store, "read": read,
                         "rounds_median_ms": [round(ms, 2) for ms in medians],
                         "x": [round(ms / base["median_ms"][read], 3) for ms, base in zip(medians, first, strict=True)],
                         "same_answers": same})
    return rows


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = kept_store_parser(__doc__.splitlines()[0], size=10_000, store="sqlite")
    parser.add_argument("--baseline", type=Path, default=None, help="another checkout, timed in turn with this one")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=3, help="times each input is read per round")
    args = parser.parse_args(argv)
    where = f"{args.size} memories" if args.url is None else args.url
    return on_filled_store(args, args.store, measure, f"browsing reads, {args.store}, {where}")


if __name__ == "__main__":
    main()
