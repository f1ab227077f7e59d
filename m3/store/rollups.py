"""What the belief roll-up pass reads (:mod:`m3.cognition.rollup`): new vectors, one owner's notes, its beliefs.

An *owner* is (scope, agent_id, user_id): a belief only ever draws on the notes of one owner and has that
owner itself, so whoever may read a belief may read each of its sources (private stays private). Every read
runs inside the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import Connection, and_, select

from m3.protocols.messages.rollup import BELIEF, CONSOLIDATES, UNCONSOLIDATED
from m3.store.schema import memories as m
from m3.store.schema import memory_embeddings as e
from m3.store.schema import memory_history as h
from m3.store.schema import memory_relationships as r
from m3.store.vectors import Matrix

Owner = tuple[str, str | None, str | None]  # scope, agent_id, user_id


@dataclass(frozen=True)
class NewVector:
    """A vector stored after the watermark: its seq, and the owner of its memory when the pass may use it."""

    seq: int
    memory_id: str
    owner: Owner | None


@dataclass(frozen=True)
class GroupNotes:
    """The current notes of one owner that have a vector of the model: rows and unit vectors, aligned."""

    rows: list[dict[str, Any]]
    vectors: Matrix

    @property
    def ids(self) -> list[str]:
        return [row["id"] for row in self.rows]


def _same(column: Any, value: str | None) -> Any:
    return column.is_(None) if value is None else column == value


def owner_clause(owner: Owner) -> Any:
    scope, agent_id, user_id = owner
    return and_(m.c.scope == scope, _same(m.c.agent_id, agent_id), _same(m.c.user_id, user_id))


def _usable(types: Sequence[str]) -> Any:
    """Current, not archived memories of ``types``."""
    return and_(m.c.type.in_(list(types)), m.c.retired_at.is_(None), m.c.archived_at.is_(None))


def new_vectors(conn: Connection, model: str, after_seq: int, types: Sequence[str], limit: int) -> list[NewVector]:
    """The vectors of ``model`` stored after ``after_seq`` (at most ``limit``, oldest first); ``owner`` is None
    for a memory the pass does not cluster (another type, retired, archived)."""
    usable = _usable(types)
    query = (select(e.c.seq, e.c.memory_id, m.c.scope, m.c.agent_id, m.c.user_id, usable.label("usable"))
             .join(m, m.c.id == e.c.memory_id).where(e.c.model == model, e.c.seq > after_seq)
             .order_by(e.c.seq).limit(limit))
    return [NewVector(int(seq), memory_id, (scope, agent, user) if ok else None)
            for seq, memory_id, scope, agent, user, ok in conn.execute(query)]


def group_notes(conn: Connection, model: str, owner: Owner, types: Sequence[str], limit: int) -> GroupNotes:
    """The ``limit`` most recent usable notes of ``owner`` with a vector of ``model``, oldest first, their vectors
    normalised to unit length."""
    query = (select(m.c.id, m.c.seq, m.c.title, m.c.content, m.c.importance, e.c.vector)
             .join(e, and_(e.c.memory_id == m.c.id, e.c.model == model))
             .where(owner_clause(owner), _usable(types)).order_by(m.c.seq.desc()).limit(limit))
    found = list(conn.execute(query).mappings())[::-1]
    rows = [{k: row[k] for k in ("id", "seq", "title", "content", "importance")} for row in found]
    if not found:
        return GroupNotes(rows, np.zeros((0, 0), dtype=np.float32))
    mat = np.vstack([np.asarray(row["vector"], dtype=np.float32) for row in found])
    norms = np.linalg.norm(mat, axis=1, keepdims=True)
    return GroupNotes(rows, (mat / np.where(norms > 0, norms, 1.0)).astype(np.float32))


def current_beliefs(conn: Connection, owner: Owner) -> dict[str, frozenset[str]]:
    """The owner's current roll-up beliefs, each with the ids it consolidates."""
    query = (select(m.c.id, r.c.to_id).join(r, and_(r.c.from_id == m.c.id, r.c.type == CONSOLIDATES))
             .where(owner_clause(owner), m.c.type == BELIEF, m.c.retired_at.is_(None)))
    found: dict[str, set[str]] = {}
    for belief, source in conn.execute(query):
        found.setdefault(belief, set()).add(source)
    return {belief: frozenset(sources) for belief, sources in found.items()}


def declined(conn: Connection, owner: Owner) -> list[frozenset[str]]:
    """The source sets of the owner's beliefs undone by memory_unconsolidate without ``allow_again``: the pass
    does not summarise any of these sets (or a part of one) again."""
    query = (select(h.c.details).join(m, m.c.id == h.c.memory_id)
             .where(owner_clause(owner), m.c.type == BELIEF, m.c.retire_reason == UNCONSOLIDATED,
                    h.c.event == UNCONSOLIDATED).order_by(h.c.seq))
    out = []
    for (details,) in conn.execute(query):
        if not details.get("allow_again"):
            out.append(frozenset(details.get("sources", ())))
    return out
