"""Rebuild a retrieval run's table from its per-question log (e.g. a run stopped early).

``python -m benchmarks.summarize benchmarks/results/<run>/questions.jsonl``
prints the same table as the run itself over the questions logged so far.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from benchmarks.metrics import HitTable
from benchmarks.report import hit_table_text


def table_from_log(path: Path) -> HitTable:
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not records:
        raise SystemExit(f"{path} holds no questions")
    modes = list(records[0]["hits"])
    ks = [int(k) for k in records[0]["hits"][modes[0]]]
    table = HitTable(modes, ks)
    for r in records:
        table.add(r["question_type"], {m: {int(k): v for k, v in by_k.items()} for m, by_k in r["hits"].items()})
    return table


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", type=Path, help="questions.jsonl of a run")
    args = parser.parse_args(argv)
    table = table_from_log(args.log)
    print(hit_table_text(table, f"{args.log} ({table.count()} questions)"))
    print(json.dumps(table.as_dict()))


if __name__ == "__main__":
    main()
