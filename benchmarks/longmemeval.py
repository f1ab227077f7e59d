"""LongMemEval session hit-rate SHR@k, with BM25-only and dense-only baselines.

``python -m benchmarks.longmemeval --split s --k 1,5,10,20``: one fresh
store per question holding that question's haystack (one memory per turn).
``--split oracle``: one store pooling every question's evidence sessions.
A hit at k: any of the top-k results comes from an ``answer_session_ids``
session. The question text is the query, asked at its ``question_date`` (``now``).
"""

from __future__ import annotations

from typing import Any

from benchmarks.data import LME_FILES, load_longmemeval
from benchmarks.retrieval import common_parser, run_benchmark, shard


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = common_parser(__doc__.splitlines()[0], "1,5,10,20")
    parser.add_argument("--split", choices=sorted(LME_FILES), default="s")
    args = parser.parse_args(argv)
    haystacks = load_longmemeval(args.data, args.split, args.limit)
    if args.split == "s":
        haystacks = shard(haystacks, args.shard)
    scope = {"split": args.split, "file": LME_FILES[args.split], "limit": args.limit, "shard": args.shard,
             "stores": len(haystacks)}
    return run_benchmark("longmemeval", args, haystacks, "session", scope,
                         f"LongMemEval {args.split} dev: SHR@k")


if __name__ == "__main__":
    main()
