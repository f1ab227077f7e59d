"""LoCoMo turn recall@k per category, with BM25-only and dense-only baselines.

``python -m benchmarks.locomo --k 5,10``: one fresh store per conversation
(one memory per dialogue turn, ``Speaker: text``, the ``dia_id`` in
metadata); every QA item with evidence except category 5 (adversarial) is a
query, asked at the date of the conversation's last session (``now``; LoCoMo gives no question date). A hit
at k: any evidence ``dia_id`` is among the top-k results.
"""

from __future__ import annotations

from typing import Any

from benchmarks.data import LOCOMO_FILE, load_locomo
from benchmarks.retrieval import common_parser, run_benchmark


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = common_parser(__doc__.splitlines()[0], "5,10")
    parser.add_argument("--conversations", type=int, default=None, help="only the first N conversations")
    args = parser.parse_args(argv)
    haystacks = load_locomo(args.data, args.limit)[: args.conversations]
    scope = {"file": LOCOMO_FILE, "limit_per_conversation": args.limit, "stores": len(haystacks)}
    return run_benchmark("locomo", args, haystacks, "turn", scope, "LoCoMo dev: turn recall@k")


if __name__ == "__main__":
    main()
