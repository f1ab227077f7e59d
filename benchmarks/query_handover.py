"""Search with the query embedded live: the helper thread handed Python's lock at once, against the way before.

``python -m benchmarks.query_handover --store sqlite --size 10000 [--queries 300] [--url URL]
[--native-baseline SO]``: one new store (or the filled store at ``--url``) holds ``size`` distinct
LongMemEval_S turns (``perf_search``'s fill, vectors from the embedding cache) and is let settle. One Searcher
then answers each question twice, embedding the query with the MiniLM model on one onnxruntime thread (m3's
``embed.threads`` rule on two cores), alternating which arm goes first, in one process on one store:

* ``after``: this checkout as it is: the Searcher's thread waits until the helper has begun on the query
  (``query_embedding.HANDOVER_WAIT_S``), and one text is tokenized on the calling thread;
* ``before``: the same code put back the way it was: no wait (the bound set to 0) and every text tokenized
  through the tokenizer's batch call, and with ``--native-baseline`` the scan of the native core built from
  another checkout (the ``m3_native*.so`` of ``pip wheel ./native`` there, unpacked) instead of this one's.

Prints p50/p95 of each arm and the ratio of the medians (after ÷ before); the answers of the two arms are
checked equal (ids in order) question by question.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmarks.interleaved import WARMUP, as_it_is, compare_on, parser
from benchmarks.native import load_extension
from benchmarks.perf_search import corpus, on_filled_store
from m3.embed import minilm
from m3.retrieval import native, query_embedding


def _batch_token_ids(tokenizer: Any, texts: Sequence[str], limit: int) -> list[list[int]]:
    """How every text was tokenized before: through the tokenizer's batch call, one text or many."""
    return [encoding.ids for encoding in tokenizer.encode_batch([text[:limit] for text in texts])]


@contextmanager
def before(baseline: Any) -> Iterator[None]:
    """The arm ``before``: the hand-over and the one-text tokenizing undone (and the baseline scan), then back."""
    saved = query_embedding.HANDOVER_WAIT_S, minilm._token_ids, native._EXT
    query_embedding.HANDOVER_WAIT_S = 0.0
    minilm._token_ids = _batch_token_ids
    if baseline is not None:
        native._EXT = baseline
    try:
        yield
    finally:
        query_embedding.HANDOVER_WAIT_S, minilm._token_ids, native._EXT = saved


def measure(url: str, work: Path, args: argparse.Namespace) -> list[dict[str, Any]]:
    _, queries = corpus(args.data, 1, args.queries + WARMUP)
    baseline = load_extension(args.native_baseline) if args.native_baseline is not None else None
    return compare_on(url, work, queries, lambda _searcher: {"after": as_it_is, "before": lambda: before(baseline)},
                      "before", store=args.store,
                      native_baseline=str(args.native_baseline) if args.native_baseline else None)


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    options = parser(__doc__.splitlines()[0])
    options.add_argument("--native-baseline", type=Path, default=None,
                         help="the m3_native*.so of another build, for the arm 'before'")
    args = options.parse_args(argv)
    return on_filled_store(args, args.store, measure,
                           f"search with the query embedded live, {args.store}, {args.size} memories")


if __name__ == "__main__":
    main()
