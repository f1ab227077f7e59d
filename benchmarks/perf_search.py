"""Search latency p50/p95 as a store grows (1k, 10k, 100k memories by default).

``python -m benchmarks.perf_search --sizes 1000,10000,100000 [--store postgres]``: one new store
(a temporary SQLite file, or a private embedded PostgreSQL + pgvector cluster) is
filled in steps with distinct LongMemEval_S turns, written through the Writer
in batches of 1000 (type ``conversation``); vectors come through the Embedder
actor and ``StoreVectors``, looked up in the embedding cache (a text missing
from it gets a pseudo-random unit vector; the count is reported). At each
size the same questions are searched (k=10) by a Searcher per mode whose
query embedder is the live MiniLM model, so every search pays for embedding
its query as in production (with m3's default number of onnxruntime threads, one less than the CPUs: a
query embedding on every core slows the search it runs beside); the query-embedding time alone is reported too.

Before the searches at each size the store is let **settle**: the entity indexer works off the backlog the
fill left (``ExtractEntities`` over all of it, the pass the background runs every few seconds), and on
PostgreSQL the store is analyzed (``ANALYZE``, what autovacuum does within a minute of a bulk write: without
it the planner and the keyword leg work from the statistics of a store a tenth the size), so the
searches are timed on a store at rest, as an agent meets it, not beside the indexing of the memories just
written, which shares the two cores with them. ``settle_s`` is how long that took; ``--no-settle`` times
the searches right after the vectors are stored, as this benchmark did before 2026-12-04.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from benchmarks.data import Turn, default_data_dir, load_longmemeval
from benchmarks.embedding import cached_embedder, default_cache_path, describe
from benchmarks.ingest import STORES, analyze, bench_config, store_system, store_url, write_turns
from benchmarks.latency import percentiles_ms, ratio
from benchmarks.modes import ALL_MODES, SearchModes
from benchmarks.precomputed import PrecomputedEmbedder
from benchmarks.progress import Progress
from benchmarks.report import RunDir, rows_text
from benchmarks.retrieval import int_list
from m3.actors.system import ActorSystem
from m3.embed.base import Embedder, usable_cpus
from m3.protocols.messages.entities import ExtractEntities

FILL_BATCH = 1000
WARMUP_QUERIES = 3


def corpus(data_dir: Path, size: int, queries: int, split: str = "s") -> tuple[list[Turn], list[str]]:
    """``size`` turns with distinct texts and ``queries`` question texts, from LongMemEval ``split``."""
    stacks = load_longmemeval(data_dir, split)
    seen: set[str] = set()
    turns = []
    for turn in (t for h in stacks for t in h.turns):
        if turn.content not in seen:
            seen.add(turn.content)
            turns.append(turn)
            if len(turns) == size:
                break
    if len(turns) < size:
        raise SystemExit(f"only {len(turns)} distinct turns available")
    questions = [q.text for h in stacks for q in h.questions]
    return turns, questions[:queries]


def fill(system: ActorSystem, turns: list[Turn]) -> float:
    started = time.perf_counter()
    bar = Progress("fill", len(turns))
    for start in range(0, len(turns), FILL_BATCH):
        chunk = turns[start : start + FILL_BATCH]
        write_turns(system, chunk, batch=FILL_BATCH)
        bar.update(len(chunk))
    bar.close()
    system.wait_embedded(3600.0)
    return time.perf_counter() - started


def settle(system: ActorSystem) -> tuple[float, int]:
    """Work off the entity index's backlog now (the background pass, run to the end) and, on PostgreSQL, bring
    the statistics up to date as autovacuum would within a minute; seconds taken and the memories still
    waiting after it (0 unless something was written meanwhile)."""
    started = time.perf_counter()
    system.entities.ask(ExtractEntities(limit=None), 3600.0)
    system.wait_embedded(3600.0)
    left = system.entities.ask(ExtractEntities(limit=0), 3600.0).remaining
    analyze(system.options.url)
    return time.perf_counter() - started, left


def filled_store(stack: ExitStack, store: str, args: argparse.Namespace) -> tuple[str, Path]:
    """A store's URL and a work folder, both living as long as ``stack``: ``args.url`` as given, else a new
    ``store`` filled with ``args.size`` turns (vectors from ``args.cache``) and let settle."""
    tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="m3-bench-kept-")))
    if args.url is not None:
        return args.url, tmp
    url = stack.enter_context(store_url(store, tmp))
    turns, _ = corpus(args.data, args.size, 1)
    config = bench_config(tmp).with_overrides(store__url=url, actors__ask_timeout_s=3600.0)
    system = ActorSystem(config, PrecomputedEmbedder(cached_embedder(args.cache, 1))).start()
    try:
        fill(system, turns)
        settle(system)
    finally:
        system.stop(drain_embeddings=False)
    return url, tmp


def kept_store_parser(description: str, *, size: int, store: str | None = None) -> argparse.ArgumentParser:
    """A parser with the options :func:`filled_store` reads (``--data``, ``--cache``, ``--size``, ``--url``)
    and, given a default ``store``, ``--store``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--data", type=Path, default=default_data_dir())
    parser.add_argument("--cache", type=Path, default=default_cache_path())
    if store is not None:
        parser.add_argument("--store", choices=STORES, default=store)
    parser.add_argument("--size", type=int, default=size, help="memories filled into the new store")
    parser.add_argument("--url", default=None, help="measure on this filled store instead of a new one")
    return parser


Measure = Callable[[str, Path, argparse.Namespace], list[dict[str, Any]]]


def on_filled_store(args: argparse.Namespace, store: str, measure: Measure, title: str) -> list[dict[str, Any]]:
    """``measure(url, work folder, args)`` on :func:`filled_store`'s store, its rows printed under ``title``."""
    with ExitStack() as stack:
        url, work = filled_store(stack, store, args)
        rows = measure(url, work, args)
    print(rows_text(rows, title))
    return rows


def time_searches(searchers: SearchModes, mode: str, queries: list[str], k: int) -> dict[str, float]:
    for query in queries[:WARMUP_QUERIES]:
        searchers.search(mode, query, k)
    latencies = []
    for query in queries:
        started = time.perf_counter()
        searchers.search(mode, query, k)
        latencies.append(time.perf_counter() - started)
    return percentiles_ms(latencies)


def time_query_embedding(model: Embedder, queries: list[str]) -> dict[str, float]:
    latencies = []
    for query in queries:
        started = time.perf_counter()
        model.embed([query])
        latencies.append(time.perf_counter() - started)
    return percentiles_ms(latencies)


def measure(searchers: SearchModes, model: Embedder, queries: list[str], k: int) -> dict[str, Any]:
    row: dict[str, Any] = {"embed_q_p50": time_query_embedding(model, queries)["p50_ms"]}
    for mode in searchers.handles:
        stats = time_searches(searchers, mode, queries, k)
        row[f"{mode}_p50"], row[f"{mode}_p95"] = stats["p50_ms"], stats["p95_ms"]
    return row


def add_growth(rows: list[dict[str, Any]], modes: list[str]) -> None:
    for prev, row in zip([None, *rows], rows, strict=False):
        for mode in modes:
            row[f"{mode}_p50_x"] = ratio(row[f"{mode}_p50"], prev[f"{mode}_p50"]) if prev else 1.0


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=default_data_dir())
    parser.add_argument("--cache", type=Path, default=default_cache_path())
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--modes", default=",".join(ALL_MODES))
    parser.add_argument("--source", choices=["s", "oracle"], default="s", help="LongMemEval split giving the texts")
    parser.add_argument("--store", choices=STORES, default="sqlite")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--threads", type=int, default=max(1, usable_cpus() - 1),
                        help="onnxruntime threads of the live query embedder (default: m3's embed.threads rule, "
                             "one less than the CPUs)")
    parser.add_argument("--no-settle", action="store_true",
                        help="search right after the fill, beside the indexing of what it wrote")
    args = parser.parse_args(argv)
    sizes, modes = int_list(args.sizes), [m for m in args.modes.split(",") if m]
    turns, queries = corpus(args.data, sizes[-1], args.queries, args.source)
    cache = cached_embedder(args.cache, args.threads)
    vectors = PrecomputedEmbedder(cache)
    rows: list[dict[str, Any]] = []
    with RunDir("perf_search", args.out) as run, store_system(args.store, vectors) as system:
        searchers = SearchModes(system, modes, embedder=cache.inner)
        try:
            filled = 0
            for size in sizes:
                fill_s = fill(system, turns[filled:size])
                settle_s, backlog = (0.0, -1) if args.no_settle else settle(system)
                filled = size
                rows.append({"memories": size, "fill_s": round(fill_s, 1), "settle_s": round(settle_s, 1),
                             "entity_backlog": backlog,
                             **measure(searchers, cache.inner, queries, args.k)})
                run.log(rows[-1])
                print(rows_text(rows[-1:], f"{size} memories"), flush=True)
        finally:
            searchers.stop()
        add_growth(rows, modes)
        summary = run.summary({"store": args.store, "k": args.k, "settled": not args.no_settle,
                               "queries": len(queries), "embedder": describe(cache),
                               "vectors": {"from_cache": vectors.cached, "synthetic": vectors.synthetic},
                               "sizes": rows})
    print(rows_text(rows, f"{args.store} search latency (ms) as the store grows ({run.path})"))
    print(f"vectors from cache {vectors.cached}, synthetic {vectors.synthetic}; runtime {summary['runtime_s']} s")
    return summary


if __name__ == "__main__":
    main()
