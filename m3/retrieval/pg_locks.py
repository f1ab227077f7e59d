"""Exactly-once write decisions when several processes write one PostgreSQL store at once.

Before it writes anything, each write transaction takes transaction-scoped advisory locks in ascending
key order, in one statement: one per owner group (model, type, agent, user) of the vectors it stores, for
similarity supersession, and one per duplicate key of the memories it writes, for exact deduplication. A
second transaction on a key waits for the first to commit, then (READ COMMITTED) sees its rows, so exactly
one memory stays current. Every lock comes before any row lock, in one order, so these cannot deadlock
(row-lock deadlocks are retried by the Writer). One Writer per engine already serialises its own writes:
the locks only order transactions of different engines, and a transaction takes each key once whatever
the number of requests in it. A model's first HNSW index is created in the same step, for the same reason;
once it is known to exist it is not looked up again (docs/postgres.md, "Many writers").

Candidates come from the database: after a unit of vectors is stored, :meth:`LockedCandidates.gather`
finds the neighbours of all of them in one statement (:func:`m3.store.pg_nearest.nearest_each`), which
sees the vectors stored earlier in the transaction as the per-vector query did.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection, RowMapping, select

from m3.protocols.base import Message
from m3.protocols.messages.memory import StoreVectors, WriteMemories
from m3.retrieval.supersession import Vector
from m3.store import memories as rows
from m3.store import pg_nearest, postgres
from m3.store.schema import memories as m

#: Most candidates one stored vector is compared with (as the in-memory index on SQLite).
NEAR_LIMIT = 32
#: Kept above the threshold in SQL by this much: the exact cut (``1 - distance > threshold``, as the
#: per-vector query made it) is made in Python, so a float rounding in SQL cannot drop a candidate.
DISTANCE_SLACK = 1e-6

Owner = tuple[str, str | None, str | None]


class LockedCandidates:
    """Supersession candidates straight from PostgreSQL, under per-group advisory locks; one per Writer."""

    def __init__(self, exempt_types: frozenset[str]):
        self._exempt = exempt_types
        #: (model, dim) whose HNSW index is known to exist, committed: no catalog query for them.
        self._indexed: set[tuple[str, int]] = set()
        #: Per stored vector of the current unit: its neighbours when gathered, best first.
        self._found: dict[str, list[tuple[str, float]]] = {}
        self._threshold: float | None = None
        #: Memories retired since the unit's candidates were gathered (no longer current).
        self._gone: set[str] = set()

    def prepare(self, conn: Connection, batch: Sequence[Message]) -> None:
        self._forget_unit()
        keys: list[int] = []
        for msg in batch:
            if isinstance(msg, WriteMemories):
                keys += [postgres.lock_key("duplicate", rows.content_hash(mem.content), mem.type, mem.agent_id,
                                           mem.user_id, mem.conversation_id) for mem in msg.memories]
        stores = [msg for msg in batch if isinstance(msg, StoreVectors)]
        for model, dim in sorted({(msg.model, msg.dim) for msg in stores} - self._indexed):
            if not postgres.ensure_hnsw_index(conn, model, dim):
                # Found committed; one this transaction creates is remembered only once it is seen committed,
                # as a rollback would take it away.
                self._indexed.add((model, dim))
        owners = _owners(conn, [i for msg in stores for i in msg.ids])
        keys += [postgres.lock_key("group", msg.model, *owners[i]) for msg in stores for i in msg.ids
                 if i in owners and owners[i][0] not in self._exempt]
        postgres.lock_all(conn, keys)

    def reset(self) -> None:
        """The transaction failed or the models changed: look the indexes up again."""
        self._indexed.clear()
        self._forget_unit()

    def add(self, model: str, memory_id: str, owner: Owner, vector: Vector) -> None:
        return None  # the database is the index

    def discard(self, memory_id: str) -> None:
        self._gone.add(memory_id)

    def gather(self, conn: Connection, model: str, dim: int, stored: Sequence[RowMapping], threshold: float) -> None:
        by_owner: dict[Owner, list[str]] = {}
        for row in stored:
            by_owner.setdefault((row["type"], row["agent_id"], row["user_id"]), []).append(row["id"])
        groups = [(rows.owner_clause(*owner), ids) for owner, ids in by_owner.items()]
        found = pg_nearest.nearest_each(conn, model, dim, groups, NEAR_LIMIT, 1.0 - threshold + DISTANCE_SLACK)
        self._forget_unit()
        self._found = {row["id"]: found.get(row["id"], []) for row in stored}
        self._threshold = threshold

    def near(self, conn: Connection, model: str, row: RowMapping, vector: Vector, threshold: float) -> list[str]:
        hits = self._found.get(row["id"]) if threshold == self._threshold else None
        if hits is not None and (len(hits) < NEAR_LIMIT or not self._gone.intersection(i for i, _ in hits)):
            # The gathered list is what the query would return now: memories retired since were among the
            # current ones it chose from, and either none of them is in it or it held every match.
            return [memory_id for memory_id, cosine in hits if cosine > threshold and memory_id not in self._gone]
        found = pg_nearest.nearest(conn, model, int(vector.shape[0]), vector, rows.same_owner_clause(row), NEAR_LIMIT)
        return [memory_id for memory_id, cosine, _ in found if cosine > threshold]

    def _forget_unit(self) -> None:
        self._found, self._threshold, self._gone = {}, None, set()


def _owners(conn: Connection, ids: list[str]) -> dict[str, Owner]:
    """(type, agent, user) of the existing memories among ``ids``."""
    out: dict[str, Owner] = {}
    for chunk in rows.chunks(ids):
        out.update((i, (t, a, u)) for i, t, a, u in conn.execute(
            select(m.c.id, m.c.type, m.c.agent_id, m.c.user_id).where(m.c.id.in_(chunk))))
    return out
