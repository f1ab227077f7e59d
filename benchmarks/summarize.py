"""Rebuild a retrieval run's table from its per-question log (e.g. a run stopped early).

``python -m benchmarks.summarize benchmarks/results/<run>/questions.jsonl [more logs]``
prints the same table as the run itself over the questions logged so far
(several logs, e.g. the ``--shard`` runs of one benchmark, are pooled).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from benchmarks.metrics import HitTable
from benchmarks.report import hit_table_text


def table_from_log(*paths: Path) -> HitTable:
    """The hit table over every question in the logs (several logs: the shards of one run)."""
    records = [json.loads(line) for path in paths
               for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not records:
        raise SystemExit(f"{[str(p) for p in paths]} hold no questions")
    modes = list(records[0]["hits"])
    ks = [int(k) for k in records[0]["hits"][modes[0]]]
    table = HitTable(modes, ks)
    for r in records:
        table.add(r["question_type"], {m: {int(k): v for k, v in by_k.items()} for m, by_k in r["hits"].items()})
    return table


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("logs", type=Path, nargs="+", help="questions.jsonl of a run (or of each shard)")
    args = parser.parse_args(argv)
    table = table_from_log(*args.logs)
    print(hit_table_text(table, f"{' '.join(map(str, args.logs))} ({table.count()} questions)"))
    print(json.dumps(table.as_dict()))


if __name__ == "__main__":
    main()
