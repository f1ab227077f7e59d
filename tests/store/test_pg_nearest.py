"""PostgreSQL's nearest-neighbour statements: many query vectors in one statement answer as one query each."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest
from sqlalchemy import Connection, Engine, event

from m3.protocols.messages.memory import NewMemory, WriteMemories
from m3.store import memories as rows
from m3.store import pg_nearest, postgres, vectors
from m3.store.clock import Clock
from m3.store.memory_writes import MemoryWrites

pytestmark = pytest.mark.store_only("postgres", reason="pgvector's HNSW statements exist only on PostgreSQL")

MODEL, DIM = "test-model", 16


def unit(rng: np.random.Generator, n: int, spread: float) -> np.ndarray:
    """``n`` unit vectors around one random direction."""
    out = rng.standard_normal(DIM) + spread * rng.standard_normal((n, DIM))
    return (out / np.linalg.norm(out, axis=1, keepdims=True)).astype(np.float32)


def write(conn: Connection, agent: str, n: int) -> list[str]:
    """``n`` facts of ``agent``, committed."""
    msg = WriteMemories(memories=tuple(NewMemory(type="fact", agent_id=agent, content=f"{agent} fact {i}")
                                       for i in range(n)), actor=agent)
    with conn.begin():
        [(outcomes, _)] = MemoryWrites(conn, Clock()).write_all([msg])
    return [out.id for out in outcomes]


def store(conn: Connection, ids: list[str], matrix: np.ndarray) -> None:
    """Store the vectors, the model's index first: committed, or inside the caller's open transaction."""
    with conn.begin_nested() if conn.in_transaction() else conn.begin():
        postgres.ensure_hnsw_index(conn, MODEL, DIM)
        vectors.store(conn, MODEL, DIM, ids, matrix, datetime.now(UTC), existing=dict.fromkeys(ids, False))


def statements_of(engine: Engine) -> list[str]:
    """Every statement ``engine`` sends from now on."""
    seen: list[str] = []
    event.listen(engine, "before_cursor_execute", lambda *args: seen.append(args[2]))
    return seen


def one_by_one(conn: Connection, ids: list[str], matrix: np.ndarray, limit: int) -> dict[str, list[tuple[str, float]]]:
    """pg_nearest.nearest for each id's vector among the current memories of its owner group."""
    return {memory_id: [(hit, cosine) for hit, cosine, _ in pg_nearest.nearest(
                conn, MODEL, DIM, matrix[k], rows.same_owner_clause(rows.load(conn, memory_id)), limit)]
            for k, memory_id in enumerate(ids)}


def test_the_neighbours_of_many_vectors_in_one_statement_are_those_of_one_query_each_including_uncommitted_ones(
        writer_engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(7)
    ops_vec, dev_vec = unit(rng, 30, 0.3), unit(rng, 20, 0.3)
    seen = statements_of(writer_engine)
    with writer_engine.connect() as conn:
        ops, dev = write(conn, "ops", 30), write(conn, "dev", 20)
        store(conn, ops[:20], ops_vec[:20])
        store(conn, dev, dev_vec)
        with conn.begin():
            store(conn, ops[20:], ops_vec[20:])  # as the Writer stores a unit before it decides on it
            asked = ops[15:] + dev[:5]
            expected = one_by_one(conn, asked, np.vstack([ops_vec[15:], dev_vec[:5]]), 8)
            groups = [(rows.owner_clause("fact", "ops", None), ops[15:]),
                      (rows.owner_clause("fact", "dev", None), dev[:5])]
            seen.clear()
            assert pg_nearest.nearest_each(conn, MODEL, DIM, groups, 8, 2.0) == expected
            assert len(seen) == 1
            assert set(ops[20:]) & {hit for hits in expected.values() for hit, _ in hits}  # uncommitted ones found
            monkeypatch.setattr(pg_nearest, "NEAREST_EACH_PAGE", 4)
            seen.clear()
            assert pg_nearest.nearest_each(conn, MODEL, DIM, groups, 8, 2.0) == expected
            assert len(seen) == 5  # 15 + 5 ids, at most 4 per statement


def test_neighbours_at_or_beyond_the_distance_cut_are_left_out(writer_engine: Engine) -> None:
    rng = np.random.default_rng(8)
    matrix = unit(rng, 12, 0.6)
    with writer_engine.connect() as conn:
        ids = write(conn, "ops", 12)
        store(conn, ids, matrix)
        everything = one_by_one(conn, ids[:3], matrix[:3], 12)
        cut = pg_nearest.nearest_each(conn, MODEL, DIM, [(rows.owner_clause("fact", "ops", None), ids[:3])], 12, 0.3)
    for memory_id in ids[:3]:
        assert cut.get(memory_id, []) == [(hit, cos) for hit, cos in everything[memory_id] if 1.0 - cos < 0.3]
    assert any(len(cut.get(i, [])) < len(everything[i]) for i in ids[:3])  # the cut removed something
