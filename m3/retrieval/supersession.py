"""Similarity supersession, run by the Writer when vectors arrive.

Rule (docs/architecture.md, "Similarity supersession"): among current memories of one owner group
(type, agent, user) whose vectors of one model have a cosine above the threshold and whose texts differ,
the most recently recorded stays current and each other is closed, linked by ``supersedes``, only when
the pair agrees on its anchors (:mod:`m3.retrieval.anchors`). A pair that disagrees stays current and is
recorded as a ``near_duplicate`` conflict, at most :data:`MAX_CONFLICTS` per stored vector, nearest
first. Exempt types never supersede. The newer memory's author gets a ``superseded`` notification.

A :class:`Candidates` only proposes; each candidate is re-checked in the Writer's transaction (still
current, same owner, cosine of the stored vectors) before anything is closed. SQLite's
:class:`CandidateIndex` keeps the vectors per owner group in memory and, at the start of each write
transaction, loads the committed ones it has not seen (under the write lock, so other processes' too).
PostgreSQL, where processes write at once, uses :class:`m3.retrieval.pg_locks.LockedCandidates`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

import numpy as np
import numpy.typing as npt
from sqlalchemy import Connection, RowMapping, bindparam, select

from m3.protocols.base import Message
from m3.protocols.messages.memory import StoreVectors
from m3.retrieval.anchors import compare
from m3.retrieval.vector_index import VectorIndex
from m3.store import conflict_writes, inbox_writes, vectors
from m3.store import memories as rows
from m3.store.dialect import Dialect
from m3.store.memory_writes import MemoryWrites
from m3.store.schema import memories as m
from m3.store.schema import memory_embeddings as e
from m3.store.schema import memory_history as h
from m3.store.vectors import embed_text

Vector = npt.NDArray[np.float32]
GroupKey = tuple[str, str, str | None, str | None]  # model, type, agent, user

#: Most conflict candidates recorded for one stored vector: templated notes (one per customer, say) are
#: all near each other, and a pair per neighbour would bury the useful ones.
MAX_CONFLICTS = 3
#: Committed vectors the candidate index loads per query.
LOAD_PAGE = 20_000
ACTOR = "m3:supersession"


@dataclass(frozen=True)
class SupersessionPolicy:
    threshold: float
    exempt_types: frozenset[str]


class Candidates(Protocol):
    """Where the Writer finds supersession candidates; one per Writer."""

    def prepare(self, conn: Connection, batch: Sequence[Message]) -> None:
        """Called at the start of each write transaction, before anything is written in it."""

    def add(self, model: str, memory_id: str, owner: tuple[str, str | None, str | None], vector: Vector) -> None:
        """A vector stored in the current transaction."""

    def discard(self, memory_id: str) -> None:
        """A memory that can no longer be superseded (retired or erased)."""

    def gather(self, conn: Connection, model: str, dim: int, stored: Sequence[RowMapping], threshold: float) -> None:
        """Called once per unit of stored vectors, after they are stored and added and before the first
        :meth:`near` of the unit: a chance to find the candidates of all of them at once."""

    def near(self, conn: Connection, model: str, row: RowMapping, vector: Vector, threshold: float) -> list[str]:
        """Ids in ``row``'s owner group whose cosine to ``vector`` exceeds ``threshold``, best first: the
        current ones as of this call (those retired earlier in the unit are not proposed)."""

    def reset(self) -> None:
        """The write transaction failed, or the models changed: forget what may no longer hold."""


_COMMITTED_AFTER = (
    select(e.c.seq, e.c.memory_id)
    .where(e.c.model == bindparam("model"), e.c.seq > bindparam("after"))
    .order_by(e.c.seq).limit(bindparam("page"))
)
_VECTORS_AT = (
    select(e.c.memory_id, e.c.vector, m.c.type, m.c.agent_id, m.c.user_id)
    .join(m, m.c.id == e.c.memory_id)
    .where(e.c.seq.in_(bindparam("seqs", expanding=True)))
    .order_by(e.c.seq)
)


class CandidateIndex:
    """Vectors of supersedable memories per owner group, in memory; owned by one SQLite Writer."""

    def __init__(self, exempt_types: frozenset[str]):
        self._exempt = exempt_types
        self._groups: dict[GroupKey, VectorIndex] = {}
        self._group_of: dict[str, GroupKey] = {}
        self._last_seq: dict[str, int] = {}
        #: Per model, the memories whose vectors this Writer added since the last prepare() (its own writes).
        self._added: dict[str, set[str]] = {}
        #: Each vector of the current unit: the ids gather() found possibly above the threshold, until near().
        self._proposed: dict[str, list[str]] = {}

    def prepare(self, conn: Connection, batch: Sequence[Message]) -> None:
        # Nothing is written yet in this transaction: the committed vectors not seen yet are loaded, no others.
        # The vectors this Writer stored itself are in the index already (the same values: a memory's vector
        # of one model is computed from its unchanging content), so only the others' are read in full.
        for model in {msg.model for msg in batch if isinstance(msg, StoreVectors)}:
            own = self._added.pop(model, set())
            while True:
                found = conn.execute(_COMMITTED_AFTER, {"model": model, "after": self._last_seq.get(model, 0),
                                                        "page": LOAD_PAGE}).all()
                others = [int(seq) for seq, memory_id in found if memory_id not in own]
                for start in range(0, len(others), 500):
                    for memory_id, vector, mtype, agent, user in conn.execute(
                            _VECTORS_AT, {"seqs": others[start:start + 500]}):
                        if mtype not in self._exempt:
                            self._index(model, memory_id, (mtype, agent, user), vector)
                if found:
                    self._last_seq[model] = int(found[-1][0])
                if len(found) < LOAD_PAGE:
                    break

    def add(self, model: str, memory_id: str, owner: tuple[str, str | None, str | None], vector: Vector) -> None:
        self._added.setdefault(model, set()).add(memory_id)
        self._index(model, memory_id, owner, vector)

    def _index(self, model: str, memory_id: str, owner: tuple[str, str | None, str | None], vector: Vector) -> None:
        key = (model, *owner)
        self._groups.setdefault(key, VectorIndex()).add([memory_id], vector.reshape(1, -1))
        self._group_of[memory_id] = key

    def discard(self, memory_id: str) -> None:
        key = self._group_of.pop(memory_id, None)
        if key is not None:
            self._groups[key].remove([memory_id])

    def gather(self, conn: Connection, model: str, dim: int, stored: Sequence[RowMapping], threshold: float) -> None:
        # One matrix product per owner group for the whole unit: a pass over the group per vector cost the
        # Writer ~0.45 ms a vector at 6k rows (docs/benchmarks.md); near() still ranks exactly.
        self._proposed.clear()
        by_group: dict[GroupKey, list[str]] = {}
        for row in stored:
            key = (model, row["type"], row["agent_id"], row["user_id"])
            if key in self._groups and row["id"] in self._group_of:
                by_group.setdefault(key, []).append(row["id"])
        for key, ids in by_group.items():
            self._proposed.update(zip(ids, self._groups[key].ids_above(ids, threshold), strict=True))

    def reset(self) -> None:
        # A rolled-back transaction may have left vectors here that were never committed; near() only
        # proposes, and _apply_rule re-reads the stored vectors, so they are harmless and are kept.
        self._proposed.clear()

    def near(self, conn: Connection, model: str, row: RowMapping, vector: Vector, threshold: float) -> list[str]:
        group = self._groups.get((model, row["type"], row["agent_id"], row["user_id"]))
        proposed = self._proposed.pop(row["id"], None)  # None: not gathered, every row of the group
        if group is None:
            return []
        return [i for i, cos in group.top(vector, 32, proposed) if cos > threshold and i != row["id"]]


def supersede_similar(conn: Connection, msg: StoreVectors, policy: SupersessionPolicy,
                      clock: Callable[[], datetime], index: Candidates) -> list[str]:
    """Store the vectors, then apply the rule; returns the agents that got a ``superseded`` notification."""
    matrix = np.frombuffer(msg.vectors, dtype="<f4").reshape(len(msg.ids), msg.dim)
    found = rows.decision_rows(conn, msg.ids, msg.model)
    kept = vectors.store(conn, msg.model, msg.dim, msg.ids, matrix, clock(),
                         existing={i: bool(row["has_vector"]) for i, row in found.items()})
    position = {memory_id: i for i, memory_id in enumerate(msg.ids)}
    stored = sorted((found[i] for i in kept), key=lambda r: r["recorded_at"])
    eligible = [row for row in stored if row["type"] not in policy.exempt_types and row["retired_at"] is None
                and row["archived_at"] is None]
    for row in eligible:
        index.add(msg.model, row["id"], (row["type"], row["agent_id"], row["user_id"]), matrix[position[row["id"]]])
    notified: list[str] = []
    if not msg.supersede:
        return notified
    index.gather(conn, msg.model, msg.dim, eligible, policy.threshold)
    ops = MemoryWrites(conn, clock)
    for row in eligible:
        vector = matrix[position[row["id"]]]
        # The owner (type, agent, user) never changes, so candidates come before the row is read again.
        candidates = index.near(conn, msg.model, row, vector, policy.threshold)
        if not candidates:
            continue
        current = rows.load(conn, row["id"])  # an earlier row of this batch may have retired it
        if current["retired_at"] is None:
            _apply_rule(conn, ops, current, vector, msg.model, candidates, policy, index, notified)
    return notified


def _apply_rule(conn: Connection, ops: MemoryWrites, row: RowMapping, vector: Vector, model: str,
                candidate_ids: list[str], policy: SupersessionPolicy, index: Candidates, notified: list[str]) -> None:
    """Re-check the candidates against the database; close the stale side of each pair that agrees on its
    anchors, record the pairs that do not as conflict candidates."""
    where = m.c.id.in_(candidate_ids) & rows.same_owner_clause(row)
    ids, mat = vectors.vectors_for(conn, model, where)
    if not ids:
        return
    sims = mat @ vector
    flagged = 0
    for idx in np.argsort(-sims):
        cosine = round(float(sims[idx]), 4)
        if float(sims[idx]) <= policy.threshold:
            break
        other = rows.load(conn, ids[idx])
        if other["retired_at"] is not None:
            index.discard(other["id"])
            continue
        if other["content_hash"] == row["content_hash"]:
            continue
        older, newer = (other, row) if other["recorded_at"] < row["recorded_at"] else (row, other)
        agreement = compare(embed_text(older["title"], older["content"]), embed_text(newer["title"], newer["content"]))
        if not agreement.agree:
            if flagged < MAX_CONFLICTS:
                flagged += 1
                conflict_writes.record_conflict(
                    conn, older, newer, kind="near_duplicate", reason=agreement.reason(), similarity=cosine,
                    details={"differences": {k: [list(a), list(b)] for k, (a, b) in agreement.differences.items()}},
                    now=ops.clock(), actor=ACTOR)
            continue
        _retire(conn, ops, older, newer, cosine, index, notified)
        if older is row:
            break  # a newer version already exists: this one was the stale one


def _retire(conn: Connection, ops: MemoryWrites, older: RowMapping, newer: RowMapping, cosine: float,
            index: Candidates, notified: list[str]) -> None:
    """Close ``older`` in favour of ``newer`` (no longer a candidate), say why in both histories and tell
    newer's author."""
    now = ops.clock()
    why = f"similar (cosine {cosine}) and the anchors agree"
    if not ops.close_superseded(older, newer["id"], now, valid_to=newer["valid_from"], actor=ACTOR, reason=why,
                                how="similarity", cosine=cosine):
        return
    rows.record_events(conn, [rows.event(newer["id"], "supersedes", ACTOR, now, old=older["id"], how="similarity",
                                         reason=why, cosine=cosine)])
    index.discard(older["id"])
    author = _author(conn, newer["id"])
    if author is not None and not author.startswith("m3:"):
        inbox_writes.notify(conn, to_agent=author, kind="superseded", now=now, from_agent=ACTOR, ref_id=newer["id"],
                     message=f"memory {newer['id']} superseded {older['id']}: {why}",
                     data={"memory_id": newer["id"], "superseded": older["id"], "cosine": cosine,
                           "reason": why})
        notified.append(author)


def _author(conn: Connection, memory_id: str) -> str | None:
    """The actor that created ``memory_id`` (the agent that wrote it), if any."""
    found = conn.execute(select(h.c.actor).where(h.c.memory_id == memory_id, h.c.event == "created")
                         .order_by(h.c.seq).limit(1)).first()
    return None if found is None else found[0]


def candidates_for(dialect: Dialect, exempt_types: frozenset[str]) -> Candidates:
    """An in-memory index where writes are serial (it stays exact); else advisory locks and SQL."""
    if dialect.serial_writes:
        return CandidateIndex(exempt_types)
    from m3.retrieval.pg_locks import LockedCandidates  # it builds on this module

    return LockedCandidates(exempt_types)
