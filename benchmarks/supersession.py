"""Supersession precision and recall on a labelled set of true updates and distinct facts.

``python -m benchmarks.supersession [--data DIR] [--instances N]``: builds the labelled set
(:mod:`benchmarks.supersession_set`), then writes every pair through the real system -- Writer,
Embedder (offline MiniLM through the benchmark cache) and the similarity rule as configured -- into a
temporary SQLite store, each pair under an owner of its own so that pairs never meet: first every old
note, then (after their vectors are stored) every new one. Each pair ends *superseded* (the old note
retired in favour of the new), *flagged* (both current, recorded as a conflict candidate: ``near_duplicate`` or
``contradiction``), *duplicate* (both current, recorded by the Reflector as the same fact in other words) or
*untouched* (both current, nothing recorded).

Then the Reflector (the cognitive loop's ``reflect`` pass, :mod:`benchmarks.reflector`) runs once over the
store, and the same outcomes are counted again with its ``contradiction`` conflicts as *flagged* and its
``duplicate`` ones as *duplicate*: one
run reports supersession alone (``groups``, ``totals``) and with the Reflector (``groups_with_reflector``,
``totals_with_reflector``).

Per group it reports how many pairs had cosine above the threshold and each outcome. For true updates,
``recall_superseded`` = superseded / n and ``recall_caught`` = (superseded + flagged + duplicate) / n; for distinct
facts ``retired`` must be 0. ``precision`` = superseded true updates / everything superseded.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, select
from sqlalchemy.pool import NullPool

from benchmarks.data import default_data_dir
from benchmarks.embedding import cached_embedder, describe
from benchmarks.ingest import EMBED_TIMEOUT_S, fresh_system
from benchmarks.reflector import reflect_all
from benchmarks.report import RunDir, rows_text
from benchmarks.supersession_set import DISTINCT, UPDATE, Pair, labelled_set
from m3.actors.system import ActorSystem
from m3.embed.base import Embedder
from m3.protocols.messages.memory import NewMemory, WriteMemories
from m3.retrieval.anchors import compare
from m3.store import schema
from m3.store.vectors import embed_text

GROUPS = ("update_said", "update_restated", "restatement", "distinct")
OUTCOMES = ("superseded", "flagged", "duplicate", "untouched")
#: Outcomes that count a true update as caught: retired, or waiting in conflicts for a person or the model.
CAUGHT = ("superseded", "flagged", "duplicate")


def _write(system: ActorSystem, notes: list[tuple[str, str]]) -> list[str]:
    """Write (owner, text) notes as facts; their ids once every vector is stored (and the rule has run)."""
    memories = tuple(NewMemory(type="fact", content=text, agent_id=owner) for owner, text in notes)
    outcomes = system.writer.ask(WriteMemories(memories=memories, actor="bench-writer"), EMBED_TIMEOUT_S)
    system.wait_embedded(EMBED_TIMEOUT_S)
    return [out.id for out in outcomes]


def outcomes(system: ActorSystem, pairs: list[Pair], reflect: bool = False) -> tuple[list[str], list[str]]:
    """What the real system did with each pair: superseded, flagged, duplicate or untouched -- by similarity
    supersession alone, and (``reflect``: after one run of the Reflector over the store) with its conflicts too;
    without ``reflect`` both lists are supersession's."""
    olds = _write(system, [(f"pair-{i}", p.old) for i, p in enumerate(pairs)])
    news = _write(system, [(f"pair-{i}", p.new) for i, p in enumerate(pairs)])
    if reflect:
        reflect_all(system)
    m, c = schema.memories, schema.conflicts
    engine = create_engine(system.config.store_url, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            retired = dict(conn.execute(select(m.c.id, m.c.superseded_by).where(m.c.retired_at.is_not(None))).all())
            kinds = {(a, b): kind for a, b, kind in conn.execute(select(c.c.memory_a, c.c.memory_b, c.c.kind))}
    finally:
        engine.dispose()
    alone = _classify(olds, news, retired, {pair: kind for pair, kind in kinds.items() if kind == "near_duplicate"})
    return alone, _classify(olds, news, retired, kinds)


def _classify(olds: list[str], news: list[str], retired: dict[str, str],
              flagged: dict[tuple[str, str], str]) -> list[str]:
    """Per pair: superseded, flagged (a near_duplicate or contradiction), duplicate (the Reflector's) or
    untouched."""
    out = []
    for old, new in zip(olds, news, strict=True):
        if retired.get(old) == new:
            out.append("superseded")
        elif old in retired or new in retired:
            out.append("other_retired")  # cannot happen with one pair per owner; counted, not hidden
        elif (old, new) in flagged:
            out.append("duplicate" if flagged[(old, new)] == "duplicate" else "flagged")
        else:
            out.append("untouched")
    return out


def cosines(embedder: Embedder, pairs: list[Pair]) -> list[float]:
    a = embedder.embed([embed_text(None, p.old) for p in pairs])
    b = embedder.embed([embed_text(None, p.new) for p in pairs])
    return [round(float(x), 4) for x in (a * b).sum(axis=1)]


def table(pairs: list[Pair], results: list[str], sims: list[float], threshold: float) -> list[dict[str, Any]]:
    rows = []
    for group in GROUPS:
        idx = [i for i, p in enumerate(pairs) if p.group == group]
        if not idx:
            continue
        n = len(idx)
        count = {k: sum(results[i] == k for i in idx) for k in OUTCOMES}
        row: dict[str, Any] = {"group": group, "label": pairs[idx[0]].label, "n": n,
                               "above_threshold": sum(sims[i] > threshold for i in idx), **count}
        above = row["above_threshold"]
        if pairs[idx[0]].label == UPDATE:
            row["recall_superseded"] = round(count["superseded"] / n, 3)
            row["recall_caught"] = round(sum(count[k] for k in CAUGHT) / n, 3)
            caught_above = sum(results[i] in CAUGHT and sims[i] > threshold for i in idx)
            row["caught_of_above"] = round(caught_above / above, 3) if above else "-"
        else:
            row["recall_superseded"] = row["recall_caught"] = row["caught_of_above"] = "-"
        rows.append(row)
    return rows


def totals(pairs: list[Pair], results: list[str]) -> dict[str, Any]:
    updates = [r for p, r in zip(pairs, results, strict=True) if p.label == UPDATE]
    distinct = [r for p, r in zip(pairs, results, strict=True) if p.label == DISTINCT]
    superseded_true = updates.count("superseded")
    superseded_all = superseded_true + distinct.count("superseded")
    return {
        "true_updates": len(updates), "distinct_facts": len(distinct),
        "distinct_retired": sum(r not in {"untouched", "flagged", "duplicate"} for r in distinct),
        "distinct_flagged": distinct.count("flagged") + distinct.count("duplicate"),
        "precision": round(superseded_true / superseded_all, 3) if superseded_all else None,
        "recall_superseded": round(superseded_true / len(updates), 3) if updates else None,
        "recall_caught": round(sum(r in CAUGHT for r in updates) / len(updates), 3) if updates else None,
    }


SWEEP = (0.80, 0.85, 0.88, 0.90, 0.92, 0.95)


def sweep(pairs: list[Pair], sims: list[float], thresholds: tuple[float, ...] = SWEEP) -> list[dict[str, Any]]:
    """The rule worked out offline (cosine above t, then the anchor check) at other thresholds: what a
    different ``supersede.threshold`` would do to each label."""
    agree = [compare(embed_text(None, p.old), embed_text(None, p.new)).agree for p in pairs]
    rows = []
    for t in thresholds:
        row: dict[str, Any] = {"threshold": t}
        for label in (UPDATE, DISTINCT):
            idx = [i for i, p in enumerate(pairs) if p.label == label and sims[i] > t]
            row[f"{label}_superseded"] = sum(agree[i] for i in idx)
            row[f"{label}_flagged"] = sum(not agree[i] for i in idx)
        updates = sum(p.label == UPDATE for p in pairs)
        row["recall_caught"] = round((row["update_superseded"] + row["update_flagged"]) / updates, 3) if updates else 0
        rows.append(row)
    return rows


def run(data_dir: Path, embedder: Embedder, instances: int, out_root: Path | None = None) -> dict[str, Any]:
    with RunDir("supersession", out_root) as run_dir:
        pairs = labelled_set(data_dir, embedder.embed, instances)
        with fresh_system(embedder) as system:
            threshold = float(system.config["supersede.threshold"])
            results, reflected = outcomes(system, pairs, reflect=True)
        sims = cosines(embedder, pairs)
        for pair, result, both, sim in zip(pairs, results, reflected, sims, strict=True):
            run_dir.log({"group": pair.group, "label": pair.label, "source": pair.source, "old": pair.old,
                         "new": pair.new, "cosine": sim, "outcome": result, "with_reflector": both})
        return run_dir.summary({"scope": {"pairs": len(pairs), "instances": instances, "data": str(data_dir)},
                                "threshold": threshold, "groups": table(pairs, results, sims, threshold),
                                "totals": totals(pairs, results),
                                "groups_with_reflector": table(pairs, reflected, sims, threshold),
                                "totals_with_reflector": totals(pairs, reflected), "sweep": sweep(pairs, sims),
                                "log": str(run_dir.path / "questions.jsonl")})


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=default_data_dir())
    parser.add_argument("--instances", type=int, default=10, help="instances per template (distinct pairs: n-1)")
    parser.add_argument("--cache", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    embedder = cached_embedder(args.cache)
    summary = run(args.data, embedder, args.instances, args.out)
    title = f"supersession at cosine > {summary['threshold']} ({describe(embedder)['model']})"
    print(rows_text(summary["groups"], title))
    print(rows_text([summary["totals"]], "totals"))
    print(rows_text(summary["groups_with_reflector"], "with the Reflector's contradictions (flagged) and duplicates"))
    print(rows_text([summary["totals_with_reflector"]], "totals with the Reflector"))
    print(rows_text(summary["sweep"], "the same rule at other thresholds (worked out offline)"))
    print(f"log: {summary['log']}")
    return summary


if __name__ == "__main__":
    main()
