"""The retrieval harness shared by LongMemEval and LoCoMo.

For each haystack: a fresh store, ingestion through the Writer, then every
question searched in every mode at every k (a separate search per k, as a
caller asking for k results would; MMR makes a top-5 list more than the
first five of a top-20 list). Each question is logged with its gold labels
and every mode's results; hits are counted per type.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from benchmarks.cache import CachingEmbedder
from benchmarks.data import Haystack, Question, Turn, default_data_dir
from benchmarks.embedding import cached_embedder, default_cache_path, describe, prewarm
from benchmarks.ingest import bench_config, fresh_system, ingest
from benchmarks.metrics import HitTable, first_hit_rank
from benchmarks.modes import ALL_MODES, MODE_OVERRIDES, SearchModes
from benchmarks.progress import Progress
from benchmarks.report import RunDir, hit_table_text

T = TypeVar("T")


def common_parser(description: str, default_k: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--data", type=Path, default=default_data_dir(), help="benchmark data (../shared/data)")
    parser.add_argument("--k", default=default_k, help="comma-separated cut-offs")
    parser.add_argument("--modes", default=",".join(ALL_MODES), help="comma-separated: bm25, dense, m3")
    parser.add_argument("--limit", type=int, default=None, help="only the first N questions (smoke runs)")
    parser.add_argument("--shard", default="0/1", help="I/N: only questions whose index %% N == I (parallel runs)")
    parser.add_argument("--cache", type=Path, default=default_cache_path(), help="embedding cache file")
    parser.add_argument("--threads", type=int, default=None, help="onnxruntime threads (default: all CPUs)")
    parser.add_argument("--out", type=Path, default=None, help="results root (default benchmarks/results)")
    parser.add_argument("--exact-queries", action="store_true",
                        help="embed the questions exactly (embed.query_int8 false) instead of m3's default")
    return parser


def shard(items: list[T], spec: str) -> list[T]:
    """The items whose index modulo N is I, for ``spec`` "I/N"."""
    index, count = (int(part) for part in spec.split("/"))
    if not 0 <= index < count:
        raise SystemExit(f"--shard {spec}: need 0 <= I < N")
    return items[index::count]


def int_list(text: str) -> list[int]:
    return sorted({int(part) for part in text.split(",") if part.strip()})


@dataclass
class Harness:
    """Runs questions against haystacks, for one benchmark run."""

    modes: Sequence[str]
    ks: Sequence[int]
    #: "session" (LongMemEval SHR) or "turn" (LoCoMo recall).
    level: str
    run: RunDir
    table: HitTable = field(init=False)
    #: Settings of every store besides m3's defaults (``--exact-queries``).
    overrides: dict[str, Any] = field(default_factory=dict)
    embed_s: float = 0.0
    ingest_s: float = 0.0
    search_s: float = 0.0
    memories: int = 0

    def __post_init__(self) -> None:
        self.table = HitTable(self.modes, self.ks)

    def run_all(self, haystacks: Sequence[Haystack], embedder: CachingEmbedder) -> None:
        bar = Progress(self.run.benchmark, sum(len(h.questions) for h in haystacks))
        try:
            for haystack in haystacks:
                if haystack.questions:
                    self.run_haystack(haystack, embedder, bar)
        finally:
            bar.close()

    def run_haystack(self, haystack: Haystack, embedder: CachingEmbedder, bar: Progress) -> None:
        started = time.perf_counter()
        prewarm(embedder, [q.text for q in haystack.questions] + [t.content for t in haystack.turns])
        self.embed_s += time.perf_counter() - started
        # The metrics are over the turns alone (one memory per turn, shared/data/README.md): the cognitive loop's
        # first tick (after loop.interval_s) would add observations derived from them, results that no turn maps
        # to, to a store searched for longer than that (the pooled oracle store).
        with fresh_system(embedder, loop__enabled=False, **self.overrides) as system:
            started = time.perf_counter()
            by_id = ingest(system, haystack.turns)
            self.ingest_s += time.perf_counter() - started
            self.memories += len(by_id)
            searchers = SearchModes(system, self.modes)
            try:
                for question in haystack.questions:
                    record = self.evaluate(question, searchers, by_id)
                    record.update(haystack=haystack.name, memories=len(by_id))
                    self.run.log(record)
                    bar.update(note=self.running_note())
            finally:
                searchers.stop()

    def evaluate(self, q: Question, searchers: SearchModes, by_id: dict[str, Turn]) -> dict[str, Any]:
        gold = q.gold_turns if self.level == "turn" else q.gold_sessions
        hits: dict[str, dict[int, bool]] = {}
        results: dict[str, Any] = {}
        for mode in self.modes:
            hits[mode], results[mode] = {}, {}
            for k in self.ks:
                started = time.perf_counter()
                found = searchers.search(mode, q.text, k, q.date)
                self.search_s += time.perf_counter() - started
                items = [_item(h.id, h.score, h.bm25, by_id[h.id]) for h in found]
                rank = first_hit_rank((i[self.level] for i in items), gold)
                hits[mode][k] = rank is not None
                results[mode][str(k)] = {"first_hit_rank": rank, "items": items}
        self.table.add(q.qtype, hits)
        return {"question_id": q.qid, "question_type": q.qtype, "question": q.text,
                "gold_sessions": sorted(q.gold_sessions), "gold_turns": sorted(q.gold_turns),
                "hits": {m: {str(k): v for k, v in by_k.items()} for m, by_k in hits.items()}, "results": results}

    def running_note(self) -> str:
        k = self.ks[min(1, len(self.ks) - 1)]
        return " ".join(f"{m}@{k}={self.table.rate(m, 'overall', k):.3f}" for m in self.modes)


def _item(memory_id: str, score: float, bm25: float, turn: Turn) -> dict[str, Any]:
    return {"id": memory_id, "session": turn.session_id, "turn": turn.key, "score": score, "bm25": bm25}


def _query_precision(embedder: CachingEmbedder) -> str:
    """How the Searchers embedded the questions (m3's default ``embed.query_int8``, benchmarks.modes)."""
    with tempfile.TemporaryDirectory() as tmp:
        if not bench_config(Path(tmp))["embed.query_int8"]:
            return "float32"
        return str(getattr(embedder.for_queries(Path(tmp)).inner, "precision", "float32"))


def run_benchmark(name: str, args: argparse.Namespace, haystacks: list[Haystack], level: str,
                  scope: dict[str, Any], title: str, embedder: CachingEmbedder | None = None) -> dict[str, Any]:
    """Run every haystack, write the summary, print the table; return the summary.

    ``embedder`` defaults to MiniLM behind the cache at ``args.cache`` (tests pass a small one).
    """
    modes = [m for m in args.modes.split(",") if m]
    unknown = set(modes) - set(MODE_OVERRIDES)
    if unknown:
        raise SystemExit(f"unknown modes {sorted(unknown)}; use {list(ALL_MODES)}")
    embedder = embedder or cached_embedder(args.cache, args.threads)
    with RunDir(name, args.out) as run:
        exact = getattr(args, "exact_queries", False)
        harness = Harness(modes=modes, ks=int_list(args.k), level=level, run=run,
                          overrides={"embed__query_int8": False} if exact else {})
        harness.run_all(haystacks, embedder)
        summary = run.summary({
            "scope": {**scope, "questions": harness.table.count(), "memories": harness.memories},
            "embedder": describe(embedder), "queries": "float32" if exact else _query_precision(embedder),
            "modes": {m: MODE_OVERRIDES[m] for m in modes},
            "timing_s": {"embed_misses": round(harness.embed_s, 1), "ingest": round(harness.ingest_s, 1),
                         "search": round(harness.search_s, 1)},
            "results": harness.table.as_dict(), "log": str(run.path / "questions.jsonl"),
        })
    print(hit_table_text(harness.table, f"{title}  ({run.path})"))
    print(f"runtime {summary['runtime_s']} s; embedding misses {summary['timing_s']['embed_misses']} s; "
          f"ingest {summary['timing_s']['ingest']} s; "
          f"search {summary['timing_s']['search']} s; cache {describe(embedder)}")
    return summary
