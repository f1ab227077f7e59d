"""The Observer pass measured: what one run after ingest does to LongMemEval_S SHR@k, and what it costs.

``python -m benchmarks.loop_observe lme --data ../shared/data --per-type 4``: for each chosen question, a fresh
store holding its haystack (one ``conversation`` memory per turn, as :mod:`benchmarks.longmemeval` does), the
question searched (m3's fused search) before and after the Observer ran once over everything (ticks until no
backlog, observations embedded); SHR@k per question type, both columns from one run. An observation counts for
the session of the turn it quotes (its ``conversation_id``). ``--per-type N`` takes the first N questions of each
type (``--types`` narrows the types), since the whole split is hours of embedding on a small machine.

``python -m benchmarks.loop_observe cost --data ../shared/data --items 10000 --store sqlite``: the first
``--items`` LongMemEval_S turns as conversation memories in a store with a Writer alone (no Embedder: the
vectors of the observations are the Embedder's cost, the same as for any write), then the pass run to the end of
its backlog; CPU seconds of the pass's ``step`` (its thread) and wall seconds of the Writer's commits, per 1,000
items read.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.cache import CachingEmbedder
from benchmarks.data import Haystack, default_data_dir, load_longmemeval
from benchmarks.embedding import cached_embedder, default_cache_path, prewarm
from benchmarks.ingest import fresh_system, ingest, store_url, turn_memory
from benchmarks.modes import SearchModes
from m3.actors.supervisor import ActorHandle
from m3.actors.system import ActorSystem
from m3.actors.writer import Writer
from m3.cognition.observer import ObservePass
from m3.cognition.passes import PassContext, PassStep
from m3.protocols.messages.memory import WriteMemories
from m3.retrieval.supersession import SupersessionPolicy
from m3.store.clock import Clock
from m3.store.engine import StoreOptions, migrate, open_engine
from m3.store.schema import memories as m

BUDGET = 500
ASK_S = 3600.0


@dataclass
class PassRun:
    """What running the pass to the end of its backlog took."""

    steps: list[PassStep] = field(default_factory=list)
    #: CPU seconds of ``step`` (the calling thread's).
    step_cpu: float = 0.0
    #: Wall seconds of the Writer's commits, and the process's CPU seconds meanwhile (the caller only waits, so
    #: with no Embedder running this is the Writer's and the store's CPU; SQLite runs in the process, PostgreSQL
    #: in its own server processes, not counted).
    commit_s: float = 0.0
    commit_cpu: float = 0.0
    written: int = 0


def run_pass(engine: Any, writer: ActorHandle, budget: int = BUDGET) -> PassRun:
    """Tick the Observer until its backlog is done."""
    observer, run = ObservePass(), PassRun()
    while not run.steps or run.steps[-1].more:
        started = time.thread_time()
        with engine.connect() as conn, conn.begin():
            step = observer.step(conn, PassContext(now=Clock()(), budget=budget))
        run.step_cpu += time.thread_time() - started
        started, cpu = time.perf_counter(), time.process_time()
        run.written += observer.produced([writer.ask(w, ASK_S) for w in step.writes])
        run.commit_s += time.perf_counter() - started
        run.commit_cpu += time.process_time() - cpu
        run.steps.append(step)
    return run


# -- LongMemEval_S: with and without ----------------------------------------------------------------------


def chosen(haystacks: list[Haystack], per_type: int, types: set[str]) -> list[Haystack]:
    """The first ``per_type`` haystacks of each question type (of ``types``, when given), in file order."""
    taken: dict[str, int] = defaultdict(int)
    out = []
    for h in haystacks:
        qtype = h.questions[0].qtype
        if (not types or qtype in types) and taken[qtype] < per_type:
            taken[qtype] += 1
            out.append(h)
    return out


def sessions_of(system: ActorSystem, ids: Sequence[str]) -> dict[str, str | None]:
    """memory id -> its conversation id (the session a hit counts for)."""
    engine = open_engine(system.options, "reader")
    try:
        with engine.connect() as conn:
            rows = conn.execute(m.select().with_only_columns(m.c.id, m.c.conversation_id).where(m.c.id.in_(list(ids))))
            return {r.id: r.conversation_id for r in rows}
    finally:
        engine.dispose()


def hits(system: ActorSystem, question: Any, ks: list[int]) -> dict[int, bool]:
    searchers = SearchModes(system, ["m3"])
    try:
        found = {k: [h.id for h in searchers.search("m3", question.text, k)] for k in ks}
    finally:
        searchers.stop()
    session = sessions_of(system, sorted({i for ids in found.values() for i in ids}))
    return {k: any(session.get(i) in question.gold_sessions for i in ids) for k, ids in found.items()}


def lme(args: argparse.Namespace, embedder: CachingEmbedder | None = None) -> dict[str, Any]:
    """Run the comparison (``embedder`` defaults to MiniLM behind the cache at ``args.cache``)."""
    ks = sorted({int(k) for k in args.k.split(",")})
    haystacks = chosen(load_longmemeval(args.data, "s"), args.per_type, set(filter(None, args.types.split(","))))
    haystacks = haystacks[getattr(args, "skip", 0):]
    embedder = embedder or cached_embedder(args.cache, args.threads)
    table: dict[str, dict[str, dict[int, int]]] = defaultdict(lambda: {"without": defaultdict(int),
                                                                      "with": defaultdict(int)})
    counts: dict[str, int] = defaultdict(int)
    log: list[dict[str, Any]] = []
    started = time.perf_counter()
    for n, haystack in enumerate(haystacks, 1):
        [question] = haystack.questions
        prewarm(embedder, [question.text] + [t.content for t in haystack.turns])
        with fresh_system(embedder) as system:
            ingest(system, haystack.turns)
            before = hits(system, question, ks)
            engine = open_engine(system.options, "reader")
            try:
                done = run_pass(engine, system.writer)
            finally:
                engine.dispose()
            system.wait_embedded(ASK_S)
            after = hits(system, question, ks)
        for qtype in (question.qtype, "overall"):
            counts[qtype] += 1
            for k in ks:
                table[qtype]["without"][k] += before[k]
                table[qtype]["with"][k] += after[k]
        log.append({"question_id": question.qid, "type": question.qtype, "turns": len(haystack.turns),
                    "observations": done.written, "step_cpu_s": round(done.step_cpu, 3),
                    "commit_s": round(done.commit_s, 3), "without": before, "with": after})
        print(f"[{n}/{len(haystacks)}] {question.qid} {question.qtype}: {done.written} observations; "
              f"without {before} with {after}", flush=True)
    result = {"questions": len(haystacks), "per_type": args.per_type, "ks": ks, "runtime_s":
              round(time.perf_counter() - started, 1), "observations": sum(e["observations"] for e in log),
              "turns": sum(e["turns"] for e in log),
              "shr": {t: {"n": counts[t], **{side: {k: round(v[side][k] / counts[t], 3) for k in ks}
                                             for side in ("without", "with")}} for t, v in table.items()},
              "log": log}
    print(shr_table(result))
    return result


def shr_table(result: dict[str, Any]) -> str:
    ks = result["ks"]
    head = "| type | n | " + " | ".join(f"@{k} without | @{k} with" for k in ks) + " |"
    lines = [head, "|" + "---|" * (2 + 2 * len(ks))]
    for qtype, row in sorted(result["shr"].items(), key=lambda kv: (kv[0] == "overall", kv[0])):
        cells = " | ".join(f"{row['without'][k]:.3f} | {row['with'][k]:.3f}" for k in ks)
        lines.append(f"| {qtype} | {row['n']} | {cells} |")
    return "\n".join(lines)


# -- cost: CPU per 1,000 items ------------------------------------------------------------------------------


def bare_writer(url: str) -> tuple[StoreOptions, ActorHandle]:
    options = StoreOptions(url=url)
    engine = open_engine(options, "writer")
    try:
        migrate(engine)
    finally:
        engine.dispose()
    policy = SupersessionPolicy(threshold=0.92, exempt_types=frozenset({"conversation", "observation"}))
    return options, ActorHandle("writer", Writer, options, max_batch=256, policy=policy, searcher=None,
                                embedder=None).start()


def first_turns(data: Path, items: int) -> Iterator[Any]:
    n = 0
    for haystack in load_longmemeval(data, "s"):
        for turn in haystack.turns:
            yield turn
            n += 1
            if n >= items:
                return


def cost(args: argparse.Namespace) -> dict[str, Any]:
    turns = list(first_turns(args.data, args.items))
    with tempfile.TemporaryDirectory(prefix="m3-observe-cost-") as tmp, store_url(args.store, Path(tmp)) as url:
        options, writer = bare_writer(url)
        engine = open_engine(options, "reader")
        try:
            for start in range(0, len(turns), 256):
                chunk = turns[start:start + 256]
                writer.ask(WriteMemories(memories=tuple(turn_memory(t) for t in chunk), actor="benchmark"), ASK_S)
            done = run_pass(engine, writer, args.budget)
        finally:
            engine.dispose()
            writer.stop(timeout=60)
    seen = sum(s.seen for s in done.steps)
    per_1000 = 1000 / max(1, seen)
    result = {"store": args.store, "items": seen, "user_turns": sum(t.role == "user" for t in turns),
              "observations": done.written, "ticks": len(done.steps), "budget": args.budget,
              "step_cpu_s": round(done.step_cpu, 3), "commit_wall_s": round(done.commit_s, 3),
              "commit_cpu_s": round(done.commit_cpu, 3),
              "step_cpu_s_per_1000": round(done.step_cpu * per_1000, 3),
              "commit_cpu_s_per_1000": round(done.commit_cpu * per_1000, 3),
              "commit_wall_s_per_1000": round(done.commit_s * per_1000, 3)}
    print(json.dumps(result, indent=2))
    return result


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=default_data_dir())
    parser.add_argument("--out", type=Path, default=None, help="write the result as JSON here")
    sub = parser.add_subparsers(dest="what", required=True)
    one = sub.add_parser("lme", help="LongMemEval_S SHR@k with and without one Observer run")
    one.add_argument("--k", default="1,5,10,20")
    one.add_argument("--per-type", type=int, default=4)
    one.add_argument("--types", default="", help="comma-separated question types (default: all)")
    one.add_argument("--skip", type=int, default=0, help="leave out the first N chosen questions (run earlier)")
    one.add_argument("--cache", type=Path, default=default_cache_path())
    one.add_argument("--threads", type=int, default=None)
    two = sub.add_parser("cost", help="CPU seconds of the pass per 1,000 items")
    two.add_argument("--items", type=int, default=10_000)
    two.add_argument("--budget", type=int, default=BUDGET)
    two.add_argument("--store", default="sqlite", choices=("sqlite", "postgres"))
    args = parser.parse_args(argv)
    result = lme(args) if args.what == "lme" else cost(args)
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=2, default=str), encoding="utf-8")
    return result


if __name__ == "__main__":
    main()
