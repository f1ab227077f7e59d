"""One Searcher answering each question once per arm, alternating which arm goes first, on one store.

Two ways of searching compared in one process on one store, question by question, so the machine's drift
(these machines are shared) touches both alike. Used by ``query_handover`` and ``int8_scan``.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from benchmarks.ingest import bench_config
from benchmarks.latency import percentiles_ms
from benchmarks.perf_search import kept_store_parser
from m3.actors.searcher import Searcher
from m3.actors.system import query_variant, search_weights, store_options
from m3.embed.base import Embedder
from m3.embed.minilm import MiniLMEmbedder
from m3.gateway.runtime import settle_heap
from m3.protocols.messages.memory import MemoryFilter, SearchMemories
from m3.retrieval.search_statements import KeptStatements

#: Questions answered first and left out of the figures (the model's and the store's caches warm up).
WARMUP = 10
#: An arm: entered around each of its searches.
Arm = Callable[[], AbstractContextManager[None]]


@contextmanager
def as_it_is() -> Iterator[None]:
    """The arm that changes nothing: this checkout as it is."""
    yield


def live_searcher(url: str, work: Path, embedder: Embedder | None = None) -> Searcher:
    """A Searcher on ``url`` that embeds each query with ``embedder``, by default the MiniLM model on one
    onnxruntime thread (m3's ``embed.threads`` rule on two cores) as m3's Searcher embeds queries
    (``embed.query_int8``), set up; the caller calls ``release()``."""
    config = bench_config(work).with_overrides(store__url=url)
    if embedder is None:
        model = MiniLMEmbedder(threads=1)
        model.load()
        embedder = model
    searcher = Searcher(store_options(config), embedder=embedder, queries=query_variant(config),
                        weights=search_weights(config),
                        candidates=config["search.candidates"], writer=None, stats=None, on_crash=None)
    searcher.setup()
    return searcher


def compare(searcher: Searcher, queries: list[str], arms: dict[str, Arm], base: str,
            flt: MemoryFilter | None = None, **labels: Any) -> list[dict[str, Any]]:
    """Each question by every arm (alternating the order), k = 10, under ``flt`` (default: none); per arm
    p50/p95 and the ratio of its median to ``base``'s, and how many questions' answers (ids in order) differed
    between the arms."""
    flt = flt or MemoryFilter()
    warm = min(WARMUP, len(queries) // 2)  # a small data set has fewer questions than asked
    latencies: dict[str, list[float]] = {name: [] for name in arms}
    # Each arm keeps statements of its own (the Searcher keeps them per filter from one search to the next): an
    # arm that builds them another way never runs the other arm's.
    kept = {name: KeptStatements() for name in arms}
    differing = 0
    for i, query in enumerate(queries):
        answers = {}
        for name in sorted(arms, reverse=i % 2 == 1):
            searcher._kept = kept[name]
            with arms[name]():
                started = time.perf_counter()
                with searcher.conn.begin():
                    found = searcher.search(SearchMemories(query=query, k=10, filter=flt))
                took = time.perf_counter() - started
            answers[name] = [item.id for item in found.items]
            if i >= warm:
                latencies[name].append(took)
        differing += len({tuple(ids) for ids in answers.values()}) > 1
    median = statistics.median(latencies[base])
    return [{"arm": name, **labels, "queries": len(v), **percentiles_ms(v),
             "p50_x": round(statistics.median(v) / median, 3), "answers_differing": differing}
            for name, v in latencies.items()]


def parser(description: str) -> argparse.ArgumentParser:
    """:func:`benchmarks.perf_search.kept_store_parser` (10k memories, SQLite by default) with ``--queries``."""
    made = kept_store_parser(description, size=10_000, store="sqlite")
    made.add_argument("--queries", type=int, default=300)
    return made


def compare_on(url: str, work: Path, queries: list[str], arms: Callable[[Searcher], dict[str, Arm]], base: str,
               embedder: Embedder | None = None, flt: MemoryFilter | None = None, **labels: Any
               ) -> list[dict[str, Any]]:
    """:func:`compare` with a :func:`live_searcher` on ``url``, released afterwards; ``arms`` are made for it. The
    process's heap is settled for the run, as the engine's is once started."""
    searcher = live_searcher(url, work, embedder)
    made = arms(searcher)
    # As the engine does (m3.gateway.runtime.settle_heap): what exists before the searches lives as long as the
    # process, so the collector no longer walks it during one; without this the collections cost ~3 % of a 1k
    # search more here than in the engine (a throw-away run with and without, 2026-12-05). Put back afterwards.
    settle_heap()
    try:
        return compare(searcher, queries, made, base, flt, **labels)
    finally:
        gc.unfreeze()
        searcher.release()
