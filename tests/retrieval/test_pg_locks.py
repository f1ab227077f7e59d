"""LockedCandidates, PostgreSQL's supersession candidates: what one write transaction asks the database.

Each transaction takes its advisory locks in one statement, looks a model's HNSW index up only until it has
seen it committed, and answers each vector's candidates from the one statement of its unit, asking again
only when a memory retired since could have made room for another candidate.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import numpy as np
import pytest
from sqlalchemy import Connection, Engine, event, func, select, text, update

from m3.protocols.messages.memory import NewMemory, StoreVectors, WriteMemories
from m3.retrieval.pg_locks import NEAR_LIMIT, LockedCandidates
from m3.store import memories as rows
from m3.store import pg_nearest, schema, vectors
from m3.store.clock import Clock
from m3.store.engine import StoreOptions, open_engine
from m3.store.memory_writes import MemoryWrites

pytestmark = pytest.mark.store_only("postgres", reason="advisory locks and pgvector queries exist only on PostgreSQL")

MODEL, DIM = "test-model", 16
EXEMPT = frozenset({"conversation"})


@pytest.fixture
def engine(store_options: StoreOptions) -> Iterator[Engine]:
    engine = open_engine(store_options, "writer")
    yield engine
    engine.dispose()


def statements_of(engine: Engine) -> list[str]:
    seen: list[str] = []
    event.listen(engine, "before_cursor_execute", lambda *args: seen.append(args[2]))
    return seen


def write(conn: Connection, memories: list[NewMemory]) -> list[str]:
    with conn.begin():
        [(outcomes, _)] = MemoryWrites(conn, Clock()).write_all([WriteMemories(memories=tuple(memories), actor="t")])
    return [out.id for out in outcomes]


def facts(agent: str, n: int, memory_type: str = "fact") -> list[NewMemory]:
    return [NewMemory(type=memory_type, agent_id=agent, content=f"{agent} {memory_type} {i}") for i in range(n)]


def vectors_of(ids: list[str], matrix: np.ndarray) -> StoreVectors:
    return StoreVectors(model=MODEL, dim=DIM, ids=tuple(ids), vectors=np.ascontiguousarray(matrix, "<f4").tobytes())


def near_copies(n: int, seed: int = 3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = rng.standard_normal(DIM) + 0.01 * rng.standard_normal((n, DIM))
    return (out / np.linalg.norm(out, axis=1, keepdims=True)).astype(np.float32)


def catalog_lookups(seen: list[str]) -> int:
    return sum("pg_class" in statement for statement in seen)


def test_the_models_hnsw_index_is_looked_up_until_seen_committed_then_only_after_a_reset(engine: Engine) -> None:
    candidates, seen = LockedCandidates(EXEMPT), statements_of(engine)
    with engine.connect() as conn:
        [memory_id] = write(conn, facts("ops", 1))
        lookups = []
        for reset in (False, False, False, True, False):
            if reset:
                candidates.reset()
            seen.clear()
            with conn.begin():
                candidates.prepare(conn, [vectors_of([memory_id], near_copies(1))])
            lookups.append(catalog_lookups(seen))
    # Created by the first transaction (looked up before and after its lock), seen committed by the second.
    assert lookups == [2, 1, 0, 1, 0]


def test_an_index_created_in_a_rolled_back_transaction_is_created_again(engine: Engine) -> None:
    candidates = LockedCandidates(EXEMPT)
    hnsw = "SELECT count(*) FROM pg_indexes WHERE indexname LIKE 'ix_embeddings_hnsw_%'"
    with engine.connect() as conn:
        [memory_id] = write(conn, facts("ops", 1))
        for commit in (False, False, True):
            tx = conn.begin()
            candidates.prepare(conn, [vectors_of([memory_id], near_copies(1))])
            tx.commit() if commit else tx.rollback()
            assert conn.execute(text(hnsw)).scalar_one() == int(commit)
            conn.rollback()


def test_a_transaction_of_many_requests_takes_each_of_its_locks_once_in_one_statement(
        engine: Engine, store_options: StoreOptions) -> None:
    candidates, seen = LockedCandidates(EXEMPT), statements_of(engine)
    with engine.connect() as conn:
        ids = write(conn, facts("ops", 4) + facts("dev", 4) + facts("ops", 2, "conversation"))
        batch = [vectors_of([memory_id], near_copies(1)) for memory_id in ids]
        batch.append(WriteMemories(memories=tuple(facts("qa", 3)), actor="t"))
        for _ in range(2):  # the index is created, then seen committed
            with conn.begin():
                candidates.prepare(conn, batch)
        seen.clear()
        with conn.begin():
            candidates.prepare(conn, batch)
            other = open_engine(store_options, "reader")
            try:
                with other.connect() as watcher:
                    held = watcher.execute(select(func.count()).select_from(text("pg_locks")).where(
                        text("locktype = 'advisory' AND granted"))).scalar_one()
            finally:
                other.dispose()
    assert sum("pg_advisory_xact_lock" in s for s in seen) == 1
    assert len(seen) == 2  # the owners of every stored vector, then the locks
    assert held == 2 + 3  # two owner groups (the conversations are exempt), three duplicate keys


def test_a_vectors_candidates_come_from_its_units_statement_and_are_asked_again_only_if_a_retirement_made_room(
        engine: Engine) -> None:
    candidates, seen = LockedCandidates(EXEMPT), statements_of(engine)
    matrix = near_copies(NEAR_LIMIT + 9)
    with engine.connect() as conn:
        crowd = write(conn, facts("ops", NEAR_LIMIT + 8))
        [lone] = write(conn, facts("dev", 1))
        with conn.begin():
            candidates.prepare(conn, [vectors_of([*crowd, lone], matrix)])
            vectors.store(conn, MODEL, DIM, [*crowd, lone], matrix, datetime.now(UTC),
                          existing=dict.fromkeys([*crowd, lone], False))
            stored = [rows.load(conn, i) for i in (crowd[0], crowd[1], lone)]
            candidates.gather(conn, MODEL, DIM, stored, 0.9)

            def fresh(row_id: str, vector: np.ndarray) -> list[str]:
                """The candidates one query finds now, as the per-vector code asked."""
                return [i for i, cos, _ in pg_nearest.nearest(conn, MODEL, DIM, vector, rows.same_owner_clause(
                    rows.load(conn, row_id)), NEAR_LIMIT) if cos > 0.9]

            seen.clear()
            first = candidates.near(conn, MODEL, stored[0], matrix[0], 0.9)
            assert candidates.near(conn, MODEL, stored[2], matrix[-1], 0.9) == []  # alone in its group
            assert seen == []  # both answered from the unit's statement
            assert len(first) == NEAR_LIMIT and first == fresh(crowd[0], matrix[0])
            # crowd[0] decides and retires a memory among crowd[1]'s candidates: its full list must be asked again.
            retired = first[0] if first[0] != crowd[1] else first[1]
            conn.execute(update(schema.memories).where(schema.memories.c.id == retired)
                         .values(retired_at=datetime.now(UTC)))
            candidates.discard(retired)
            seen.clear()
            second = candidates.near(conn, MODEL, rows.load(conn, crowd[1]), matrix[1], 0.9)
            assert sum("memory_embeddings" in s for s in seen) == 1
            assert retired not in second and len(second) == NEAR_LIMIT
            assert second == fresh(crowd[1], matrix[1])
