"""Exactly-once write decisions when several processes write one PostgreSQL store at once.

Before it writes anything, each write transaction takes transaction-scoped advisory locks in ascending
key order: one per owner group (model, type, agent, user) of the vectors it stores, for similarity
supersession, and one per duplicate key of the memories it writes, for exact deduplication. A second
transaction on a key waits for the first to commit, then (READ COMMITTED) sees its rows, so exactly one
memory stays current. Every lock comes before any row lock, in one order, so these cannot deadlock
(row-lock deadlocks are retried by the Writer). A model's first HNSW index is created in the same step,
for the same reason. docs/postgres.md, "Many writers".
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection, RowMapping, select

from m3.protocols.base import Message
from m3.protocols.messages.memory import StoreVectors, WriteMemories
from m3.retrieval.supersession import Vector
from m3.store import memories as rows
from m3.store import postgres
from m3.store.schema import memories as m

#: Most candidates one stored vector is compared with (as the in-memory index on SQLite).
NEAR_LIMIT = 32


class LockedCandidates:
    """Supersession candidates straight from PostgreSQL, under per-group advisory locks."""

    def __init__(self, exempt_types: frozenset[str]):
        self._exempt = exempt_types

    def prepare(self, conn: Connection, batch: Sequence[Message]) -> None:
        keys: list[int] = []
        for msg in batch:
            if isinstance(msg, WriteMemories):
                keys += [postgres.lock_key("duplicate", rows.content_hash(mem.content), mem.type, mem.agent_id,
                                           mem.user_id, mem.conversation_id) for mem in msg.memories]
        stores = [msg for msg in batch if isinstance(msg, StoreVectors)]
        for model, dim in sorted({(msg.model, msg.dim) for msg in stores}):
            postgres.ensure_hnsw_index(conn, model, dim)
        for msg in stores:
            owners = conn.execute(select(m.c.type, m.c.agent_id, m.c.user_id).where(m.c.id.in_(list(msg.ids))))
            keys += [postgres.lock_key("group", msg.model, t, a, u) for t, a, u in owners if t not in self._exempt]
        postgres.lock_all(conn, keys)

    def add(self, model: str, memory_id: str, owner: tuple[str, str | None, str | None], vector: Vector) -> None:
        return None  # the database is the index

    def discard(self, memory_id: str) -> None:
        return None

    def near(self, conn: Connection, model: str, row: RowMapping, vector: Vector, threshold: float) -> list[str]:
        found = postgres.nearest(conn, model, int(vector.shape[0]), vector, rows.same_owner_clause(row), NEAR_LIMIT)
        return [memory_id for memory_id, cosine, _ in found if cosine > threshold]
