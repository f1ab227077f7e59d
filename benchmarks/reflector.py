"""Reflector precision and recall (the deterministic fallback rule) on a labelled set, and the pass's CPU cost.

``python -m benchmarks.reflector [--data DIR] [--instances N] [--cost N]``: builds the labelled set of
:mod:`benchmarks.supersession_set` -- true conflicts are the knowledge-update pairs (``update_said``,
``update_restated``); non-conflicts are the same-template distinct facts (``distinct``) and the restatements
(``restatement``) -- and writes every pair through the real system (Writer, Embedder with offline MiniLM
through the benchmark cache) into a temporary SQLite store, each pair under an owner of its own, old note
first. Similarity supersession is off (threshold 1.0) so that the Reflector alone is measured. Then the
``reflect`` pass runs tick by tick (as the loop will: ``step()`` in a read transaction, its writes through
the Writer) until it has looked at everything; a pair counts as *flagged* when a ``contradiction`` conflict
names it.

Reported: per group, how many pairs have cosine above ``loop.reflect.min_similarity`` and how many were
flagged; precision = flagged true conflicts / everything flagged, recall = flagged true conflicts / true
conflicts; the distinct pairs split by what changed (the subject: identifier, name, city, dated occasion --
or a value of the same subject); the rule worked out offline at other similarity floors; and the CPU
seconds the pass's ``step()`` took (its thread's CPU time) per 1,000 memories, on this set and on
``--cost`` memories of a single owner (every note of the set under one owner, the worst case for the
neighbour search). The model path is not measured here (no model is configured).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, select
from sqlalchemy.pool import NullPool

from benchmarks.cache import CachingEmbedder
from benchmarks.data import LME_FILES, default_data_dir, read_json
from benchmarks.embedding import cached_embedder, describe
from benchmarks.ingest import EMBED_TIMEOUT_S, fresh_system
from benchmarks.report import RunDir, rows_text
from benchmarks.supersession_set import Pair, labelled_set, templated
from m3.actors.system import ActorSystem
from m3.cognition.contradictions import judge, restates
from m3.cognition.passes import PassContext
from m3.cognition.reflector import ReflectPass
from m3.cognition.registry import pass_settings
from m3.embed.base import Embedder
from m3.protocols.messages.memory import NewMemory, WriteMemories
from m3.store import schema
from m3.store.vectors import embed_text

CONFLICT_GROUPS = ("update_said", "update_restated")
OTHER_GROUPS = ("restatement", "distinct")
#: Slots of the templates whose change makes another subject (the rest change a value of the same subject).
SUBJECT_SLOTS = frozenset({"id4", "id3", "name", "city", "day"})
TICK_BUDGET = 200
ORDINARY_KINDS = ("contradiction", "duplicate", "near_duplicate")
SWEEP = (0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
DUPLICATE_SWEEP = (0.7, 0.75, 0.8, 0.85, 0.9)


def write_notes(system: ActorSystem, notes: Sequence[tuple[str, str]]) -> list[str]:
    """Write (owner, text) notes as facts; their ids once every vector is stored."""
    memories = tuple(NewMemory(type="fact", content=text, agent_id=owner) for owner, text in notes)
    outcomes = system.writer.ask(WriteMemories(memories=memories, actor="bench-writer"), EMBED_TIMEOUT_S)
    system.wait_embedded(EMBED_TIMEOUT_S)
    return [out.id for out in outcomes]


def reflect_all(system: ActorSystem, budget: int = TICK_BUDGET) -> dict[str, Any]:
    """Run the ``reflect`` pass until it has looked at every memory; what it saw, recorded and cost.

    ``cpu_s`` is the CPU time of the thread running ``step()`` (the pass's reading, cosines and rules);
    ``write_s`` the wall time the Writer took to commit its requests.
    """
    reflect, engine = ReflectPass(), create_engine(system.config.store_url, poolclass=NullPool)
    seen = recorded = ticks = 0
    cpu = write = 0.0
    settings = pass_settings(system.config, "reflect")
    try:
        while True:
            ctx = PassContext(now=datetime.now(UTC), budget=budget, settings=settings)
            started = time.thread_time()
            with engine.connect() as conn:
                step = reflect.step(conn, ctx)
                conn.rollback()
            cpu += time.thread_time() - started
            began = time.perf_counter()
            replies = [system.writer.ask(msg, EMBED_TIMEOUT_S) for msg in step.writes]
            write += time.perf_counter() - began
            seen, recorded, ticks = seen + step.seen, recorded + reflect.produced(replies), ticks + 1
            if not step.more:
                break
    finally:
        engine.dispose()
    return {"memories": seen, "recorded": recorded, "ticks": ticks, "cpu_s": round(cpu, 3),
            "write_s": round(write, 3), "cpu_s_per_1000": round(1000 * cpu / seen, 3) if seen else None}


def conflict_pairs(url: str, kind: str = "contradiction") -> set[tuple[str, str]]:
    """The (memory_a, memory_b) pairs recorded as conflicts of ``kind``."""
    return {(row["memory_a"], row["memory_b"]) for row in conflict_rows(url) if row["kind"] == kind}


def conflict_rows(url: str) -> list[dict[str, Any]]:
    """Every recorded conflict: memory_a, memory_b, kind, reason and similarity."""
    c = schema.conflicts
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            query = select(c.c.memory_a, c.c.memory_b, c.c.kind, c.c.reason, c.c.similarity).order_by(c.c.seq)
            return [dict(row) for row in conn.execute(query).mappings()]
    finally:
        engine.dispose()


def flagged(system: ActorSystem, pairs: Sequence[Pair]) -> tuple[list[bool], list[bool], dict[str, Any]]:
    """Write each pair under its own owner, run the pass; whether each pair was flagged as a contradiction, as a
    duplicate, and the pass's cost."""
    olds = write_notes(system, [(f"pair-{i}", p.old) for i, p in enumerate(pairs)])
    news = write_notes(system, [(f"pair-{i}", p.new) for i, p in enumerate(pairs)])
    cost = reflect_all(system)
    found = conflict_pairs(system.config.store_url)
    duplicates = conflict_pairs(system.config.store_url, "duplicate")
    ids = list(zip(olds, news, strict=True))
    return [pair in found for pair in ids], [pair in duplicates for pair in ids], cost


def ordinary_texts(data_dir: Path, limit: int) -> list[str]:
    """The LongMemEval oracle's user turns, each text once, in file order: the first ``limit``."""
    entries = read_json(data_dir / LME_FILES["oracle"])
    turns = (t["content"] for e in entries for session in e["haystack_sessions"] for t in session
             if t["role"] == "user" and t["content"].strip())
    return list(dict.fromkeys(turns))[:limit]


def ordinary_flags(embedder: Embedder, data_dir: Path, limit: int, run_dir: RunDir | None = None) -> dict[str, Any]:
    """What a real store gets: the first ``limit`` user turns of the LongMemEval oracle written as facts of one
    owner (one person telling an agent about their life across many sessions; similarity supersession as
    configured), then the pass over them. Conflicts recorded per kind, and per 1,000 memories."""
    texts = ordinary_texts(data_dir, limit)
    with fresh_system(embedder) as system:
        ids = write_notes(system, [("ordinary", text) for text in texts])
        cost = reflect_all(system)
        rows = conflict_rows(system.config.store_url)
    text_of = dict(zip(ids, texts, strict=True))
    counts = {kind: sum(row["kind"] == kind for row in rows) for kind in ORDINARY_KINDS}
    # The contradictions only the first-person name rule finds (its reasons start with the names).
    counts["contradiction_by_name"] = sum(row["kind"] == "contradiction" and row["reason"].startswith("name:")
                                          for row in rows)
    if run_dir is not None:
        for row in rows:
            run_dir.log({"ordinary": row["kind"], "cosine": row["similarity"], "reason": row["reason"],
                         "old": text_of[row["memory_a"]][:300], "new": text_of[row["memory_b"]][:300]})
    out: dict[str, Any] = {"memories": len(texts), **counts}
    out.update({f"{kind}_per_1000": round(1000 * n / len(texts), 1) if texts else None for kind, n in counts.items()})
    out["cpu_s_per_1000"] = cost["cpu_s_per_1000"]
    return out


def cosines(embedder: Embedder, pairs: Sequence[Pair]) -> list[float]:
    a = embedder.embed([embed_text(None, p.old) for p in pairs])
    b = embedder.embed([embed_text(None, p.new) for p in pairs])
    return [round(float(x), 4) for x in (a * b).sum(axis=1)]


def subgroup(pair: Pair) -> str:
    """A distinct pair by what changed: ``distinct/subject`` or ``distinct/value``; other pairs their group."""
    if pair.group != "distinct":
        return pair.group
    template, _, slot = pair.source.partition(":")
    # "version {small}.{day}": there the day slot is part of a version number, a value.
    return "distinct/subject" if slot in SUBJECT_SLOTS and template != "version" else "distinct/value"


def table(pairs: Sequence[Pair], hits: Sequence[bool], sims: Sequence[float], floor: float,
          duplicates: Sequence[bool]) -> list[dict[str, Any]]:
    """Per group: contradictions flagged (recall or false flags) and duplicates flagged."""
    rows = []
    for group in (*CONFLICT_GROUPS, *OTHER_GROUPS, "distinct/subject", "distinct/value"):
        idx = [i for i, p in enumerate(pairs) if p.group == group or subgroup(p) == group]
        if not idx:
            continue
        n, caught = len(idx), sum(hits[i] for i in idx)
        conflict = group in CONFLICT_GROUPS
        rows.append({"group": group, "label": "conflict" if conflict else "no conflict", "n": n,
                     "above_floor": sum(sims[i] > floor for i in idx), "flagged": caught,
                     "recall": round(caught / n, 3) if conflict else "-",
                     "false_flags": "-" if conflict else caught, "duplicates": sum(duplicates[i] for i in idx)})
    return rows


def totals(pairs: Sequence[Pair], hits: Sequence[bool]) -> dict[str, Any]:
    true = [h for p, h in zip(pairs, hits, strict=True) if p.group in CONFLICT_GROUPS]
    false = [h for p, h in zip(pairs, hits, strict=True) if p.group in OTHER_GROUPS]
    subject = [h for p, h in zip(pairs, hits, strict=True) if subgroup(p) == "distinct/subject"]
    out: dict[str, Any] = {"true_conflicts": len(true), "non_conflicts": len(false), "flagged_true": sum(true),
                           "flagged_false": sum(false)}
    out["precision"] = round(sum(true) / (sum(true) + sum(false)), 3) if sum(true) + sum(false) else None
    out["recall"] = round(sum(true) / len(true), 3) if true else None
    out["distinct_subject_flagged"] = sum(subject)
    return out


def duplicate_sweep(pairs: Sequence[Pair], sims: Sequence[float],
                    floors: Sequence[float] = DUPLICATE_SWEEP) -> list[dict[str, Any]]:
    """The duplicate check worked out offline (cosine above the floor, no contradiction, then :func:`restates`)
    at other floors: restatements found (right), distinct pairs called duplicates (wrong), updates called
    duplicates (caught, though as a duplicate)."""
    said = [not judge(p.old, p.new).conflict and restates(p.old, p.new).conflict for p in pairs]
    rows = []
    for floor in floors:
        row: dict[str, Any] = {"duplicate_similarity": floor}
        for group in ("restatement", "distinct", *CONFLICT_GROUPS):
            row[group] = sum(d and s > floor and p.group == group for p, d, s in zip(pairs, said, sims, strict=True))
        rows.append(row)
    return rows


def sweep(pairs: Sequence[Pair], sims: Sequence[float], floors: Sequence[float] = SWEEP) -> list[dict[str, Any]]:
    """The rule worked out offline (cosine above the floor, then :func:`judge`) at other floors."""
    verdicts = [judge(p.old, p.new).conflict for p in pairs]
    true = sum(p.group in CONFLICT_GROUPS for p in pairs)
    rows = []
    for floor in floors:
        tp = sum(v and s > floor and p.group in CONFLICT_GROUPS for p, v, s in zip(pairs, verdicts, sims, strict=True))
        fp = sum(v and s > floor and p.group in OTHER_GROUPS for p, v, s in zip(pairs, verdicts, sims, strict=True))
        rows.append({"min_similarity": floor, "flagged_true": tp, "flagged_false": fp,
                     "precision": round(tp / (tp + fp), 3) if tp + fp else "-", "recall": round(tp / true, 3)})
    return rows


def one_owner_cost(embedder: Embedder, pairs: Sequence[Pair], n: int) -> dict[str, Any]:
    """The pass's cost on ``n`` notes of one owner: the set's notes, then more templated ones (each text once)."""
    more = templated(max(1, n // 20))
    texts = list(dict.fromkeys(t for p in (*pairs, *more) for t in (p.old, p.new)))[:n]
    with fresh_system(embedder, supersede__threshold=1.0) as system:
        write_notes(system, [("one-owner", text) for text in texts])
        return reflect_all(system)


def run(data_dir: Path, embedder: Embedder, instances: int, cost_n: int, ordinary_n: int,
        out_root: Path | None = None) -> dict[str, Any]:
    with RunDir("reflector", out_root) as run_dir:
        pairs = labelled_set(data_dir, embedder.embed, instances)
        with fresh_system(embedder, supersede__threshold=1.0) as system:
            floor = float(system.config["loop.reflect.min_similarity"])
            hits, duplicates, cost = flagged(system, pairs)
        sims = cosines(embedder, pairs)
        for pair, hit, dup, sim in zip(pairs, hits, duplicates, sims, strict=True):
            verdict = judge(pair.old, pair.new)
            run_dir.log({"group": pair.group, "source": pair.source, "old": pair.old, "new": pair.new, "cosine": sim,
                         "flagged": hit, "duplicate": dup, "rule": verdict.conflict, "reason": verdict.reason})
        return run_dir.summary({
            "scope": {"pairs": len(pairs), "instances": instances, "data": str(data_dir)},
            "min_similarity": floor, "groups": table(pairs, hits, sims, floor, duplicates),
            "totals": totals(pairs, hits), "sweep": sweep(pairs, sims),
            "duplicate_sweep": duplicate_sweep(pairs, sims),
            "ordinary": ordinary_flags(embedder, data_dir, ordinary_n, run_dir),
            "cost": {"labelled_set": cost, "one_owner": one_owner_cost(embedder, pairs, cost_n)},
            "embedder": describe(embedder) if isinstance(embedder, CachingEmbedder) else {},
            "log": str(run_dir.path / "questions.jsonl")})


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=default_data_dir())
    parser.add_argument("--instances", type=int, default=10, help="instances per template")
    parser.add_argument("--cost", type=int, default=1000, help="memories of one owner for the cost figure")
    parser.add_argument("--ordinary", type=int, default=4000,
                        help="LongMemEval oracle user turns written as one owner's facts, for the flags per 1,000")
    parser.add_argument("--cache", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    embedder = cached_embedder(args.cache)
    summary = run(args.data, embedder, args.instances, args.cost, args.ordinary, args.out)
    print(rows_text(summary["groups"], f"reflector rule at cosine > {summary['min_similarity']}"))
    print(rows_text([summary["totals"]], "totals"))
    print(rows_text(summary["sweep"], "the rule at other similarity floors (worked out offline)"))
    print(rows_text(summary["duplicate_sweep"], "duplicates at other floors (worked out offline)"))
    print(rows_text([summary["ordinary"]], "ordinary memories (LongMemEval oracle user turns, one owner)"))
    print(rows_text([{"run": k, **v} for k, v in summary["cost"].items()], "cost of the reflect pass"))
    print(f"log: {summary['log']}")
    return summary


if __name__ == "__main__":
    main()
