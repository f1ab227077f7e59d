"""Search with the in-memory index scanned through its int8 copy, against the f32 scan, interleaved.

``python -m benchmarks.int8_scan --size 10000 [--queries 300] [--url URL] [--int8-from-rows N]``: one new
SQLite store (or the filled store at ``--url``) holds ``size`` distinct LongMemEval_S turns (``perf_search``'s
fill, vectors from the embedding cache) and is let settle. One Searcher then answers each question with the
query embedded live (MiniLM, one onnxruntime thread), once per arm, alternating which goes first:

* ``int8``: this checkout as it is (the native core scans the int8 copy from ``native.INT8_FROM_ROWS`` rows,
  or from ``--int8-from-rows``);
* ``f32``: the same with that threshold out of reach, so the core scans the f32 matrix as before.

Prints p50/p95 of each arm, the ratio of the medians (int8 ÷ f32) and how many answers differed (the int8
rule returns the f32 scan's hits exactly, so none may). Needs the native core (``pip install ./native``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmarks.interleaved import WARMUP, compare, live_searcher
from benchmarks.perf_search import corpus, kept_store_parser, on_filled_store
from m3.retrieval import native


@contextmanager
def threshold(rows: int) -> Iterator[None]:
    """``native.INT8_FROM_ROWS`` set to ``rows`` for the block."""
    saved = native.INT8_FROM_ROWS
    native.INT8_FROM_ROWS = rows
    try:
        yield
    finally:
        native.INT8_FROM_ROWS = saved


def measure(url: str, work: Path, args: argparse.Namespace) -> list[dict[str, Any]]:
    if not native.available():
        raise SystemExit("int8_scan needs the native core: pip install ./native")
    _, queries = corpus(args.data, 1, args.queries + WARMUP)
    searcher = live_searcher(url, work)
    try:
        return compare(searcher, queries, {"int8": lambda: threshold(args.int8_from_rows),
                                           "f32": lambda: threshold(sys.maxsize)}, "f32",
                       int8_from_rows=args.int8_from_rows)
    finally:
        searcher.release()


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = kept_store_parser(__doc__.splitlines()[0], size=10_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--int8-from-rows", type=int, default=native.INT8_FROM_ROWS,
                        help="rows from which the arm 'int8' scans the int8 copy")
    args = parser.parse_args(argv)
    return on_filled_store(args, "sqlite", measure, f"int8 copy against f32 scan, SQLite, {args.size} memories")


if __name__ == "__main__":
    main()
