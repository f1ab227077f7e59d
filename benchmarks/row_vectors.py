"""PostgreSQL search reading the candidates' vectors with their rows, against a statement of their own, interleaved.

``python -m benchmarks.row_vectors --size 100000 [--queries 300] [--live] [--url URL]``: one new embedded
PostgreSQL store (or the filled store at ``--url``) holds ``size`` distinct LongMemEval_S turns
(``perf_search``'s fill, vectors from the embedding cache) and is let settle. One Searcher then answers each
question once per arm, alternating which goes first, in one process on one store:

* ``with rows``: this checkout as it is (the candidate rows are read with their stored vector);
* ``apart``: the way before: the rows without vectors, then the vectors the dense leg did not return (the
  keyword matches') in a statement of their own once the query's vector is there.

Query vectors come from the embedding cache unless ``--live`` (the MiniLM model, one onnxruntime thread).
Prints p50/p95 of each arm, the ratio of the medians (with rows ÷ apart) and how many answers differed (ids
in order; none may: the same vectors are read either way).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmarks.embedding import cached_embedder
from benchmarks.interleaved import WARMUP, as_it_is, compare, live_searcher
from benchmarks.perf_search import corpus, kept_store_parser, on_filled_store
from benchmarks.precomputed import PrecomputedEmbedder
from m3.actors.searcher import Searcher
from m3.retrieval.dense import SqlLeg


@contextmanager
def apart(searcher: Searcher) -> Iterator[None]:
    """The arm ``apart``: the Searcher's leg asks for the vectors after the rows, as before."""
    leg = searcher._dense
    if not isinstance(leg, SqlLeg):
        raise SystemExit("row_vectors measures PostgreSQL's dense leg; this store has another")
    leg.vectors_with_rows = False
    try:
        yield
    finally:
        del leg.vectors_with_rows  # the class's value again


def measure(url: str, work: Path, args: argparse.Namespace) -> list[dict[str, Any]]:
    _, queries = corpus(args.data, 1, args.queries + WARMUP)
    embedder = None if args.live else PrecomputedEmbedder(cached_embedder(args.cache, 1))
    searcher = live_searcher(url, work, embedder)
    try:
        return compare(searcher, queries, {"with rows": as_it_is, "apart": lambda: apart(searcher)}, "apart",
                       query_vectors="embedded per search" if args.live else "cached")
    finally:
        searcher.release()


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = kept_store_parser(__doc__.splitlines()[0], size=100_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--live", action="store_true", help="embed each query with the model instead of the cache")
    args = parser.parse_args(argv)
    return on_filled_store(args, "postgres", measure, f"candidate vectors with rows or apart, {args.size} memories")


if __name__ == "__main__":
    main()
