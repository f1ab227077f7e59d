"""The dense leg: the filtered top n by cosine, however much of the store the filters admit."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import numpy as np
import pytest
from sqlalchemy import Connection, event
from sqlalchemy.exc import OperationalError

from m3.actors.supervisor import ActorHandle
from m3.protocols.messages.memory import MemoryFilter, NewMemory, StoreVectors, WriteMemories
from m3.retrieval import dense
from m3.retrieval.dense import DenseLeg, SqlLeg, leg_for
from m3.store.dialect import dialect_for
from m3.store.engine import StoreOptions, open_engine
from m3.store.filters import search_clause
from m3.store.schema import memories as m
from tests.actors.conftest import WAIT_S

MODEL, DIM, COUNT = "test-model", 16, 90


@pytest.fixture
def stored(start_writer: Callable[..., ActorHandle]) -> dict[str, tuple[str, np.ndarray]]:
    """COUNT memories with random unit vectors: every third a ``fact``, the five last ``event``, the rest
    ``note``; id -> (type, vector)."""
    writer = start_writer()
    kinds = ["event" if i >= COUNT - 5 else "fact" if i % 3 == 0 else "note" for i in range(COUNT)]
    written = writer.ask(WriteMemories(memories=tuple(NewMemory(type=kind, content=f"memory {i}")
                                                      for i, kind in enumerate(kinds)), actor="tester"), WAIT_S)
    rng = np.random.default_rng(7)
    matrix = rng.standard_normal((COUNT, DIM)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    ids = [w.id for w in written]
    writer.ask(StoreVectors(model=MODEL, dim=DIM, ids=tuple(ids), vectors=matrix.astype("<f4").tobytes(),
                            supersede=False), WAIT_S)
    return {memory_id: (kind, matrix[i]) for i, (memory_id, kind) in enumerate(zip(ids, kinds, strict=True))}


@pytest.fixture
def conn(store_options: StoreOptions) -> Iterator[Connection]:
    engine = open_engine(store_options, "reader")
    with engine.connect() as connection, connection.begin():
        yield connection
    engine.dispose()


def exact_top(stored: dict[str, tuple[str, np.ndarray]], query: np.ndarray, kind: str | None, n: int) -> list[str]:
    admitted = [(float(vec @ query), i) for i, (k, vec) in stored.items() if kind is None or k == kind]
    return [i for _, i in sorted(admitted, reverse=True)[:n]]


def ready_leg(conn: Connection) -> DenseLeg:
    leg = leg_for(dialect_for(conn))
    assert leg.ready(conn, MODEL)
    return leg


@pytest.mark.parametrize("kind", [None, "fact", "event"], ids=["all admitted", "a third admitted", "five admitted"])
def test_the_leg_returns_the_exact_filtered_top_n_however_many_the_filters_admit(
        stored: dict[str, tuple[str, np.ndarray]], conn: Connection, kind: str | None) -> None:
    leg = ready_leg(conn)
    clause = search_clause(MemoryFilter(type=kind), datetime.now(UTC))
    for seed in range(5):
        query = next(iter(stored.values()))[1] if seed == 0 else np.random.default_rng(seed).standard_normal(DIM)
        query = (query / np.linalg.norm(query)).astype(np.float32)
        hits = leg.top(conn, MODEL, query, clause, 10)
        assert [i for i, _ in hits] == exact_top(stored, query, kind, 10)
        assert all(abs(s - float(stored[i][1] @ query)) < 1e-5 for i, s in hits)
        # Starting from the leg's own proposals (the few it checks first) changes nothing.
        assert leg.top(conn, MODEL, query, clause, 10, proposed=leg.propose(query, 10)) == hits


def test_the_in_memory_leg_leaves_a_time_window_to_the_searchers_connection(
        stored: dict[str, tuple[str, np.ndarray]], conn: Connection) -> None:
    if isinstance(leg_for(dialect_for(conn)), SqlLeg):
        pytest.skip("SQLite only: PostgreSQL's leg ranks a window on its second connection")
    leg = ready_leg(conn)
    query = np.ones(DIM, dtype=np.float32) / np.sqrt(DIM)
    assert leg.propose_narrow(query, search_clause(MemoryFilter(), datetime.now(UTC)), 3) is None


def test_proposals_made_apart_and_a_narrow_clause_give_the_same_hits(
        stored: dict[str, tuple[str, np.ndarray]], conn: Connection) -> None:
    # The Searcher asks for the proposals on its helper thread, and ranks a named time window as narrow.
    leg = ready_leg(conn)
    query = np.random.default_rng(11).standard_normal(DIM).astype(np.float32)
    query /= np.linalg.norm(query)
    for kind in (None, "fact"):
        clause = search_clause(MemoryFilter(type=kind), datetime.now(UTC))
        expected = leg.top(conn, MODEL, query, clause, 8)
        assert leg.top(conn, MODEL, query, clause, 8, proposed=leg.propose(query, 8)) == expected
        assert [i for i, _ in leg.top(conn, MODEL, query, clause, 8, narrow=True)] == [i for i, _ in expected]
    few = search_clause(MemoryFilter(), datetime.now(UTC)) & m.c.type.in_(["event"])
    assert [i for i, _ in leg.top(conn, MODEL, query, few, 8, narrow=True)] == exact_top(stored, query, "event", 8)


def test_on_postgresql_a_narrow_filter_admitting_few_rows_compares_them_without_the_index(
        stored: dict[str, tuple[str, np.ndarray]], conn: Connection, monkeypatch: pytest.MonkeyPatch) -> None:
    if not isinstance(leg_for(dialect_for(conn)), SqlLeg):
        pytest.skip("PostgreSQL only: SQLite's leg ranks a narrow filter's rows in memory")
    statements: list[str] = []
    event.listen(conn, "before_cursor_execute", lambda *args: statements.append(args[2]))
    leg = ready_leg(conn)
    query = np.random.default_rng(5).standard_normal(DIM).astype(np.float32)
    query /= np.linalg.norm(query)
    few = search_clause(MemoryFilter(), datetime.now(UTC)) & m.c.type.in_(["event"])
    statements.clear()
    assert [i for i, _ in leg.top(conn, MODEL, query, few, 8, narrow=True)] == exact_top(stored, query, "event", 8)
    nearest = [s for s in statements if "<=>" in s]
    assert len(nearest) == 1 and f"VECTOR({DIM})" not in nearest[0].upper()  # the exact scan, not the HNSW cast
    # Above the bound the index is walked first, as for any other filter.
    monkeypatch.setattr(dense, "EXACT_SCAN_MAX_ROWS", 4)
    statements.clear()
    assert [i for i, _ in leg.top(conn, MODEL, query, few, 3, narrow=True)] == exact_top(stored, query, "event", 3)
    assert f"VECTOR({DIM})" in next(s for s in statements if "<=>" in s).upper()


def test_the_vectors_of_every_hit_of_a_search_are_kept_for_it_the_time_legs_too(
        stored: dict[str, tuple[str, np.ndarray]], conn: Connection) -> None:
    leg = ready_leg(conn)
    query = np.random.default_rng(9).standard_normal(DIM).astype(np.float32)
    query /= np.linalg.norm(query)
    clause = search_clause(MemoryFilter(), datetime.now(UTC))
    hits = leg.top(conn, MODEL, query, clause, 5) + leg.top(conn, MODEL, query, clause & m.c.type.in_(["event"]),
                                                             5, narrow=True)
    statements: list[str] = []
    event.listen(conn, "before_cursor_execute", lambda *args: statements.append(args[2]))
    found = leg.vectors(conn, MODEL, [i for i, _ in hits])
    assert set(found) == {i for i, _ in hits} and statements == []
    assert all(np.allclose(found[i], stored[i][1]) for i in found)


def test_on_postgresql_the_proposals_come_from_a_second_connection_and_are_the_leg_s_own_top(
        stored: dict[str, tuple[str, np.ndarray]], conn: Connection, store_options: StoreOptions) -> None:
    if not isinstance(leg_for(dialect_for(conn)), SqlLeg):
        pytest.skip("PostgreSQL only: SQLite's leg proposes from its in-memory matrix")
    side_engine = open_engine(store_options, "reader")
    side_statements: list[str] = []
    event.listen(side_engine, "before_cursor_execute", lambda *args: side_statements.append(args[2]))
    try:
        leg = leg_for(dialect_for(conn), side_engine.connect)
        assert leg.ready(conn, MODEL)
        query = np.random.default_rng(13).standard_normal(DIM).astype(np.float32)
        query /= np.linalg.norm(query)
        for kind in (None, "fact"):
            clause = search_clause(MemoryFilter(type=kind), datetime.now(UTC))
            side_statements.clear()
            proposed = leg.propose(query, 8, clause=clause)
            assert any("<=>" in s for s in side_statements)
            assert [i for i, _ in proposed or []] == exact_top(stored, query, kind, 8)
            main: list[str] = []
            record = main_recorder(main)
            event.listen(conn, "before_cursor_execute", record)
            assert leg.top(conn, MODEL, query, clause, 8, proposed=proposed) == proposed  # nothing asked again
            event.remove(conn, "before_cursor_execute", record)
            assert main == []
            assert proposed == leg.top(conn, MODEL, query, clause, 8)
        assert leg.propose(query, 8) is None  # no filter given: nothing to rank in SQL apart
        # The time leg's window too: ranked apart as the Searcher's connection would rank it.
        few = search_clause(MemoryFilter(), datetime.now(UTC)) & m.c.type.in_(["event"])
        side_statements.clear()
        window = leg.propose_narrow(query, few, 3)
        assert any("<=>" in s for s in side_statements)
        assert window == leg.top(conn, MODEL, query, few, 3, narrow=True)
        assert [i for i, _ in window or []] == exact_top(stored, query, "event", 3)
    finally:
        side_engine.dispose()


def main_recorder(into: list[str]) -> Callable[..., None]:
    return lambda *args: into.append(args[2])


def test_when_the_second_connection_fails_the_leg_ranks_on_the_searchers_connection(
        stored: dict[str, tuple[str, np.ndarray]], conn: Connection, caplog: pytest.LogCaptureFixture) -> None:
    if not isinstance(leg_for(dialect_for(conn)), SqlLeg):
        pytest.skip("PostgreSQL only: SQLite's leg proposes from its in-memory matrix")

    def broken() -> Connection:
        raise OperationalError("connect", {}, ConnectionRefusedError("the server went away"))

    leg = leg_for(dialect_for(conn), broken)
    assert leg.ready(conn, MODEL)
    query = np.random.default_rng(17).standard_normal(DIM).astype(np.float32)
    query /= np.linalg.norm(query)
    clause = search_clause(MemoryFilter(), datetime.now(UTC))
    assert leg.propose(query, 8, clause=clause) is None
    assert "second connection failed" in caplog.text
    hits = leg.top(conn, MODEL, query, clause, 8, proposed=None)
    assert [i for i, _ in hits] == exact_top(stored, query, None, 8)
