"""The Reflector pass (``reflect``): contradiction candidates among the current memories of one owner.

Contract (docs/cognitive-loop.md, "Reflector"):

* **What it looks at.** Memories in ``memories.seq`` order after its watermark (``{"seq": N}``), at most
  ``ctx.budget`` a tick. A memory that is retired, archived or of an exempt type
  (``loop.reflect.exempt_types``: conversation turns, file chunks, events, observations -- a contradiction
  between two of those means nothing: each is a record of what was said or seen, not a claim that holds) is
  passed over. A memory whose vector of the active model has not arrived yet stops the tick there (the
  watermark stays before it) unless it is older than ``loop.reflect.vector_wait_s``: then it is passed over.
* **Its neighbours.** Each memory is paired with the *older* (lower ``seq``) current memories of the same owner
  -- same agent_id, user_id and scope, any eligible type -- whose cosine with it (active-model vectors, one
  numpy product per owner and tick, over its most recent :data:`NEIGHBOUR_POOL` memories) exceeds
  ``loop.reflect.min_similarity``: at most
  ``loop.reflect.max_neighbours`` of them, nearest first. Pairing only with older memories judges each pair
  once, when its newer side comes. Identical texts and pairs recorded already (as any kind, open or
  resolved) are skipped.
* **The judgement.** With a model (``ctx.llm``), up to ``ctx.llm_calls`` pairs a tick are judged by it
  (:mod:`m3.cognition.reflector_judge`); a failed call or a malformed answer falls back to the rule
  (:func:`m3.cognition.contradictions.judge`), as does every pair beyond the call budget. A pair judged no
  contradiction whose cosine exceeds ``loop.reflect.duplicate_similarity`` is a ``duplicate`` when the two
  agree on every anchor, at least one (:func:`m3.cognition.contradictions.restates`).
* **What it writes.** One :class:`RecordContradictions` per tick: the candidates (kind ``contradiction`` or
  ``duplicate``, older side as memory_a, the reason and the cosine) and the new watermark, committed together
  by the Writer. Neither kind retires anything.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
from sqlalchemy import Connection, RowMapping, and_, select

from m3.cognition.contradictions import Verdict, judge, restates
from m3.cognition.passes import PassContext, PassStep
from m3.cognition.reflector_judge import ask_model
from m3.protocols.messages.conflicts import FoundConflict, RecordContradictions
from m3.protocols.messages.memory import FILE_CHUNK
from m3.store import embedding_models, loop_state
from m3.store.conflicts import pair_exists
from m3.store.schema import memories as m
from m3.store.schema import memory_embeddings as e
from m3.store.vectors import embed_text

Matrix = npt.NDArray[np.float32]
ACTOR = "m3:reflector"
#: The defaults of the pass's settings (``loop.reflect.*``), used when the loop gives none.
DEFAULTS: Mapping[str, Any] = {
    "min_similarity": 0.5,
    "duplicate_similarity": 0.8,
    "max_neighbours": 5,
    "exempt_types": ("conversation", FILE_CHUNK, "event", "observation"),
    "vector_wait_s": 600.0,
}
#: Most older memories of one owner a tick compares with (the most recent ones): bounds a tick's memory
#: (20,000 MiniLM vectors are 30 MB) on an owner with a very large store.
NEIGHBOUR_POOL = 20_000
_COLUMNS = (m.c.seq, m.c.id, m.c.type, m.c.title, m.c.content, m.c.scope, m.c.agent_id, m.c.user_id,
            m.c.retired_at, m.c.archived_at, m.c.recorded_at, m.c.content_hash)
Owner = tuple[str, str | None, str | None]  # scope, agent, user


@dataclass(frozen=True)
class _Candidate:
    older: RowMapping
    newer: RowMapping
    similarity: float


class ReflectPass:
    """The ``reflect`` pass of the cognitive loop (implements :class:`m3.cognition.passes.LoopPass`)."""

    name: ClassVar[str] = "reflect"

    def step(self, conn: Connection, ctx: PassContext) -> PassStep:
        """Look at up to ``ctx.budget`` new memories; the one Writer request that records what it found and
        moves the watermark (none when nothing was looked at)."""
        settings = {**DEFAULTS, **ctx.settings}
        model = embedding_models.active(conn)
        after = int((loop_state.watermark(conn, self.name, {}) or {}).get("seq", 0))
        if model is None:
            return PassStep(seen=0)
        fresh = conn.execute(select(*_COLUMNS).where(m.c.seq > after).order_by(m.c.seq)
                             .limit(max(1, ctx.budget) + 1)).mappings().all()
        more = len(fresh) > ctx.budget
        ready, last, waiting = self._ready(conn, model, fresh[:ctx.budget], settings, ctx, after)
        if last == after:
            return PassStep(seen=0, more=False)
        candidates = self._candidates(conn, model, ready, settings)
        found, calls = self._judged(candidates, ctx, float(settings["duplicate_similarity"]))
        request = RecordContradictions(conflicts=tuple(found), pass_name=self.name, watermark={"seq": last},
                                       actor=ACTOR)
        return PassStep(seen=sum(1 for row in fresh[:ctx.budget] if row["seq"] <= last), writes=(request,),
                        more=more and not waiting, llm_calls=calls)

    def produced(self, replies: Sequence[Any]) -> int:
        """Conflicts recorded: the Writer replies how many of the request's pairs it recorded."""
        return sum(int(reply) for reply in replies if isinstance(reply, int))

    # -- reading ---------------------------------------------------------------------------------

    def _ready(self, conn: Connection, model: str, fresh: Sequence[RowMapping], settings: Mapping[str, Any],
               ctx: PassContext, after: int) -> tuple[list[tuple[RowMapping, Matrix]], int, bool]:
        """The eligible memories with their vectors, the seq the watermark may move to, and whether a memory
        still waiting for its vector stopped the tick."""
        exempt = frozenset(settings["exempt_types"])
        ids = [row["id"] for row in fresh if _eligible(row, exempt)]
        vectors = _vectors(conn, model, ids)
        wait = timedelta(seconds=float(settings["vector_wait_s"]))
        ready: list[tuple[RowMapping, Matrix]] = []
        last = after
        for row in fresh:
            if _eligible(row, exempt):
                vector = vectors.get(row["id"])
                if vector is None and ctx.now - row["recorded_at"] < wait:
                    return ready, last, True  # its vector is on its way: look at it next tick
                if vector is not None:
                    ready.append((row, vector))
            last = int(row["seq"])
        return ready, last, False

    def _candidates(self, conn: Connection, model: str, ready: list[tuple[RowMapping, Matrix]],
                    settings: Mapping[str, Any]) -> list[_Candidate]:
        """Per new memory, its nearest older neighbours of the same owner above the similarity floor."""
        floor, cap = float(settings["min_similarity"]), int(settings["max_neighbours"])
        exempt = tuple(settings["exempt_types"])
        by_owner: dict[Owner, list[tuple[RowMapping, Matrix]]] = {}
        for row, vector in ready:
            by_owner.setdefault((row["scope"], row["agent_id"], row["user_id"]), []).append((row, vector))
        out: list[_Candidate] = []
        seen: set[frozenset[str]] = set()
        for owner, members in by_owner.items():
            rows, matrix = _owner_vectors(conn, model, owner, exempt, max(int(r["seq"]) for r, _ in members))
            if not rows:
                continue
            seqs = np.array([int(r["seq"]) for r in rows])
            sims = np.stack([v for _, v in members]) @ matrix.T  # one product per owner and tick
            for (row, _), all_sims in zip(members, sims, strict=True):
                line = np.where(seqs < int(row["seq"]), all_sims, -2.0)  # older neighbours only
                for j in np.argsort(-line)[:cap]:
                    if line[j] <= floor:
                        break
                    other = rows[int(j)]
                    pair = frozenset((row["id"], other["id"]))
                    if other["content_hash"] == row["content_hash"] or pair in seen:
                        continue
                    seen.add(pair)
                    if not pair_exists(conn, other["id"], row["id"]):
                        out.append(_Candidate(other, row, round(float(line[j]), 4)))
        return out

    # -- judging ---------------------------------------------------------------------------------

    def _judged(self, candidates: list[_Candidate], ctx: PassContext,
                duplicate_floor: float) -> tuple[list[FoundConflict], int]:
        """The candidates judged a contradiction (by the model while calls last, else by the rule) or, when
        not, a duplicate (above ``duplicate_floor``, by :func:`restates`), and the model calls made. The most
        similar pairs get the model first."""
        calls, found = 0, []
        for cand in sorted(candidates, key=lambda c: -c.similarity):
            older, newer = _text(cand.older), _text(cand.newer)
            rule = judge(older, newer)
            verdict: Verdict | None = None
            if ctx.llm is not None and calls < ctx.llm_calls:
                calls += 1
                verdict = ask_model(ctx.llm, older, newer, rule)
            verdict = verdict or rule
            if not verdict.conflict and cand.similarity > duplicate_floor:
                verdict = restates(older, newer)
            if verdict.conflict:
                found.append(FoundConflict(older=cand.older["id"], newer=cand.newer["id"], reason=verdict.reason,
                                           similarity=cand.similarity, kind=verdict.kind,
                                           details={"by": verdict.by, "differences": verdict.differences}))
        return found, calls


def _eligible(row: RowMapping, exempt: frozenset[str]) -> bool:
    return row["retired_at"] is None and row["archived_at"] is None and row["type"] not in exempt


def _text(row: RowMapping) -> str:
    return embed_text(row["title"], row["content"])


def _vectors(conn: Connection, model: str, ids: list[str]) -> dict[str, Matrix]:
    if not ids:
        return {}
    found = conn.execute(select(e.c.memory_id, e.c.vector).where(e.c.model == model, e.c.memory_id.in_(ids)))
    return {memory_id: np.asarray(vector, dtype=np.float32).reshape(-1) for memory_id, vector in found}


def _owner_vectors(conn: Connection, model: str, owner: Owner, exempt: tuple[str, ...],
                   below: int) -> tuple[list[RowMapping], Matrix]:
    """The current, unarchived, eligible memories of ``owner`` with seq below ``below`` (the most recent
    :data:`NEIGHBOUR_POOL`) and their vectors."""
    scope, agent, user = owner
    query = (select(*_COLUMNS, e.c.vector).join(e, and_(e.c.memory_id == m.c.id, e.c.model == model))
             .where(m.c.scope == scope, _same(m.c.agent_id, agent), _same(m.c.user_id, user),
                    m.c.retired_at.is_(None), m.c.archived_at.is_(None), m.c.type.not_in(exempt), m.c.seq < below)
             .order_by(m.c.seq.desc()).limit(NEIGHBOUR_POOL))
    found = conn.execute(query).mappings().all()
    if not found:
        return [], np.zeros((0, 0), dtype=np.float32)
    matrix = np.stack([np.asarray(row["vector"], dtype=np.float32).reshape(-1) for row in found])
    return list(found), matrix


def _same(column: Any, value: str | None) -> Any:
    return column.is_(None) if value is None else column == value
