"""Similarity supersession, run by the Writer when vectors arrive.

Rule: among current memories of the same type, agent and user whose vectors
(same model) have cosine above the threshold and whose text differs, the
most recently recorded one stays current and the others are closed, linked
by ``supersedes``. Exempt types (events, conversation turns) never
supersede: repeating something is not correcting it.

Finding candidates must not cost a scan of every vector per write, so the
Writer keeps a :class:`CandidateIndex`: the vectors of non-exempt memories,
grouped by (model, type, agent, user). At the start of each write
transaction it loads the committed vectors it has not seen (by ``seq``;
under SQLite's write lock nothing else can commit meanwhile, so this also
picks up other processes' vectors), and vectors stored in the transaction
are added directly. It only proposes
candidates; every candidate above the threshold is re-checked against the
database (still current? same owner? cosine recomputed from the stored
vector) inside the Writer's transaction before anything is closed.

On PostgreSQL several processes write at once, so an in-memory index would
miss what another process stores concurrently: there the Writer uses
:class:`m3.retrieval.pg_locks.LockedCandidates`, which serialises each owner
group with an advisory lock and asks pgvector inside the transaction.
Both implement :class:`Candidates`.
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
from m3.retrieval.vector_index import VectorIndex
from m3.store import memories as rows
from m3.store import vectors
from m3.store.memory_writes import MemoryWrites
from m3.store.schema import memories as m
from m3.store.schema import memory_embeddings as e

Vector = npt.NDArray[np.float32]
GroupKey = tuple[str, str, str | None, str | None]  # model, type, agent, user


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

    def near(self, conn: Connection, model: str, row: RowMapping, vector: Vector, threshold: float) -> list[str]:
        """Ids in ``row``'s owner group whose cosine to ``vector`` exceeds ``threshold``, best first."""


_COMMITTED_AFTER = (
    select(e.c.seq, e.c.memory_id, e.c.vector, m.c.type, m.c.agent_id, m.c.user_id)
    .join(m, m.c.id == e.c.memory_id)
    .where(e.c.model == bindparam("model"), e.c.seq > bindparam("after"))
    .order_by(e.c.seq).limit(bindparam("page"))
)


class CandidateIndex:
    """Vectors of supersedable memories per owner group, in memory; owned by one SQLite Writer."""

    def __init__(self, exempt_types: frozenset[str]):
        self._exempt = exempt_types
        self._groups: dict[GroupKey, VectorIndex] = {}
        self._group_of: dict[str, GroupKey] = {}
        self._last_seq: dict[str, int] = {}

    def prepare(self, conn: Connection, batch: Sequence[Message]) -> None:
        # Nothing is written yet in this transaction: the index loads committed data only.
        for model in {msg.model for msg in batch if isinstance(msg, StoreVectors)}:
            self.refresh(conn, model)

    def refresh(self, conn: Connection, model: str, page: int = 20_000) -> None:
        """Load committed vectors of ``model`` not seen yet. Call before writing in the transaction."""
        while True:
            found = conn.execute(_COMMITTED_AFTER, {"model": model, "after": self._last_seq.get(model, 0),
                                                    "page": page}).all()
            for seq, memory_id, vector, mtype, agent, user in found:
                self._last_seq[model] = int(seq)
                if mtype not in self._exempt:
                    self.add(model, memory_id, (mtype, agent, user), vector)
            if len(found) < page:
                return

    def add(self, model: str, memory_id: str, owner: tuple[str, str | None, str | None], vector: Vector) -> None:
        key = (model, *owner)
        self._groups.setdefault(key, VectorIndex()).add([memory_id], vector.reshape(1, -1))
        self._group_of[memory_id] = key

    def discard(self, memory_id: str) -> None:
        """Forget a memory that can no longer be superseded (retired or erased)."""
        key = self._group_of.pop(memory_id, None)
        if key is not None:
            self._groups[key].remove([memory_id])

    def near(self, conn: Connection, model: str, row: RowMapping, vector: Vector, threshold: float) -> list[str]:
        """Ids in ``row``'s owner group whose cosine to ``vector`` exceeds ``threshold``, best first."""
        group = self._groups.get((model, row["type"], row["agent_id"], row["user_id"]))
        if group is None:
            return []
        return [i for i, cos in group.top(vector, 32) if cos > threshold and i != row["id"]]


def supersede_similar(conn: Connection, msg: StoreVectors, policy: SupersessionPolicy,
                      clock: Callable[[], datetime], index: Candidates) -> list[tuple[str, str]]:
    """Store the vectors, then apply the rule; returns (retired id, winner id) pairs."""
    matrix = np.frombuffer(msg.vectors, dtype="<f4").reshape(len(msg.ids), msg.dim)
    found = rows.decision_rows(conn, msg.ids, msg.model)
    kept = vectors.store(conn, msg.model, msg.dim, msg.ids, matrix, clock(),
                         existing={i: bool(row["has_vector"]) for i, row in found.items()})
    position = {memory_id: i for i, memory_id in enumerate(msg.ids)}
    stored = sorted((found[i] for i in kept), key=lambda r: r["recorded_at"])
    for row in stored:
        if row["type"] not in policy.exempt_types and row["retired_at"] is None:
            index.add(msg.model, row["id"], (row["type"], row["agent_id"], row["user_id"]),
                      matrix[position[row["id"]]])
    if not msg.supersede:
        return []
    closed: list[tuple[str, str]] = []
    ops = MemoryWrites(conn, clock)
    for row in stored:
        if row["type"] in policy.exempt_types or row["retired_at"] is not None:
            continue
        vector = matrix[position[row["id"]]]
        # The owner (type, agent, user) never changes, so candidates come before the row is read again.
        candidates = index.near(conn, msg.model, row, vector, policy.threshold)
        if not candidates:
            continue
        current = rows.load(conn, row["id"])  # an earlier row of this batch may have retired it
        if current["retired_at"] is None:
            closed += _apply_rule(conn, ops, current, vector, msg.model, candidates, policy, index)
    for loser, _winner in closed:
        index.discard(loser)
    return closed


def _apply_rule(conn: Connection, ops: MemoryWrites, row: RowMapping, vector: Vector, model: str,
                candidate_ids: list[str], policy: SupersessionPolicy, index: Candidates
                ) -> list[tuple[str, str]]:
    """Re-check the candidates against the database and close the stale side of each pair."""
    where = m.c.id.in_(candidate_ids) & rows.same_owner_clause(row)
    ids, mat = vectors.vectors_for(conn, model, where)
    if not ids:
        return []
    sims = mat @ vector
    closed: list[tuple[str, str]] = []
    for idx in np.argsort(-sims):
        cosine = float(sims[idx])
        if cosine <= policy.threshold:
            break
        other = rows.load(conn, ids[idx])
        if other["retired_at"] is not None:
            index.discard(other["id"])
            continue
        if other["content_hash"] == row["content_hash"]:
            continue
        now = ops.clock()
        if other["recorded_at"] < row["recorded_at"]:
            if ops.close_superseded(other, row["id"], now, valid_to=row["valid_from"], actor="m3:supersession",
                                    reason=None, how="similarity", cosine=round(cosine, 4)):
                closed.append((other["id"], row["id"]))
        else:  # a newer version already exists: this one is the stale one
            if ops.close_superseded(row, other["id"], now, valid_to=other["valid_from"],
                                    actor="m3:supersession", reason=None, how="similarity",
                                    cosine=round(cosine, 4)):
                closed.append((row["id"], other["id"]))
            break
    return closed
