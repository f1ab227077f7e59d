"""SQLite query plans of the hot read paths: candidates are looked up by id, never by scanning current rows.

SQLite keeps no statistics unless ANALYZE runs, so an index whose key is
NULL for almost every row (``retired_at`` of current memories) looks as
selective as a unique one. These check the plans SQLite really chooses.
PostgreSQL plans from its own statistics (autovacuum's ANALYZE).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import Connection, Engine, and_, event, select

from m3.protocols.messages.memory import MemoryFilter, NewMemory
from m3.store import id_reads, vectors
from m3.store import memories as rows
from m3.store.filters import search_clause
from m3.store.schema import memories as m
from tests.stored import is_postgres

IDS = [f"00000000-0000-4000-8000-{i:012d}" for i in range(400)]


def plan_of(conn: Connection, call: Any) -> list[str]:
    """The plan details of every SELECT that ``call(conn)`` runs."""
    seen: list[tuple[str, Any]] = []

    def record(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_args: Any) -> None:
        if statement.startswith(("SELECT", "WITH")):
            seen.append((statement, parameters))

    event.listen(conn, "before_cursor_execute", record)
    try:
        call(conn)
    finally:
        event.remove(conn, "before_cursor_execute", record)
    assert seen
    return [str(step[3]) for statement, params in seen
            for step in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, params).all()]


@pytest.fixture
def sqlite_conn(writer_engine: Engine, store_url: str) -> Any:
    if is_postgres(store_url):
        pytest.skip("SQLite only: PostgreSQL chooses plans from statistics")
    with writer_engine.connect() as conn:
        yield conn


FILTERS = {
    "plain": MemoryFilter(),
    "isolated": MemoryFilter(enforce_isolation=True, reader_agent_id="a"),
    # A filter on an indexed column must not take the place of the ids: SQLite would read every memory of the
    # type (or the agent's, the conversation's, everything recorded before as_of) instead of the candidates.
    "type": MemoryFilter(type="note"),
    "type-and-agent": MemoryFilter(type="note", agent_id="a", user_id="u"),
    "conversation": MemoryFilter(conversation_id="c1"),
    "as-of": MemoryFilter(as_of=datetime(2026, 5, 1, tzinfo=UTC), valid_at=datetime(2026, 4, 1, tzinfo=UTC)),
    "source": MemoryFilter(source_prefix="/docs"),
}


@pytest.mark.parametrize("flt", FILTERS.values(), ids=FILTERS.keys())
def test_candidate_rows_are_looked_up_by_id(sqlite_conn: Connection, flt: MemoryFilter) -> None:
    clause = search_clause(flt, datetime.now(UTC))
    for call in (lambda c: id_reads.rows_by_ids(c, IDS, clause), lambda c: rows.visible_ids(c, IDS, clause),
                 lambda c: id_reads.rows_by_ids(c, IDS, clause, columns=id_reads.RANKING_COLUMNS)):
        plan = plan_of(sqlite_conn, call)
        # The ids come as one JSON parameter (json_each): a scan of that list, then one lookup by id per entry.
        own = [step for step in plan if "memory_grants" not in step and "SUBQUERY" not in step
               and "VIRTUAL TABLE" not in step]
        assert own and all("(id=?)" in step for step in own), plan
        # Isolation asks whether a private memory was shared with the reader: one lookup by key per row.
        assert all("(memory_id=? AND agent_id=?)" in step for step in plan if "memory_grants" in step), plan


@pytest.mark.parametrize("conversation", [None, "c1"], ids=["no-conversation", "in-a-conversation"])
@pytest.mark.parametrize("writes", [1, 64], ids=["one-write", "group-commit"])
def test_duplicates_are_looked_up_by_content_hash(sqlite_conn: Connection, writes: int,
                                                  conversation: str | None) -> None:
    # A group commit asks for many hashes at once: SQLite must not trade them for the type (or conversation)
    # index, which would read every memory of that type on each commit.
    wanted = [(NewMemory(type="note", content=f"x{i}", conversation_id=conversation), f"{i:064x}")
              for i in range(writes)]
    plan = plan_of(sqlite_conn, lambda c: rows.find_duplicates(c, wanted))
    assert plan and all("ix_memories_hash" in step for step in plan if "SEARCH memories" in step), plan
    assert not any("ix_memories_owner" in step or "ix_memories_conversation" in step for step in plan), plan


def test_time_travel_can_still_use_the_retired_index(sqlite_conn: Connection) -> None:
    plan = [str(step[3]) for step in sqlite_conn.exec_driver_sql(
        "EXPLAIN QUERY PLAN SELECT id FROM memories WHERE retired_at > '2026-01-01'").all()]
    assert any("ix_memories_retired" in step for step in plan), plan


def test_reusable_vectors_are_found_from_the_given_ids(sqlite_conn: Connection) -> None:
    plan = plan_of(sqlite_conn, lambda c: vectors.reusable(c, "some-model", IDS[:64]))
    assert "(id=?)" in plan[0] and not any("ix_embeddings_model_seq" in step for step in plan), plan


@pytest.mark.parametrize("flt", [MemoryFilter(), MemoryFilter(type="note")], ids=["plain", "type"])
def test_memories_valid_in_a_named_window_are_found_by_the_valid_time_index(sqlite_conn: Connection,
                                                                            flt: MemoryFilter) -> None:
    # The Searcher's time leg ranks the memories a query's named window admits (migration 0014); a type filter
    # must not take the window's place (every memory of the type read instead).
    start, end = datetime(2026, 5, 25, tzinfo=UTC), datetime(2026, 5, 26, tzinfo=UTC)
    clause = and_(search_clause(flt, datetime.now(UTC), by_valid_time=True), m.c.valid_from >= start,
                  m.c.valid_from < end)
    plan = plan_of(sqlite_conn, lambda c: c.execute(select(m.c.id).where(clause)).all())
    assert any("ix_memories_valid_from" in step for step in plan), plan


def test_rows_are_found_by_their_successor_through_an_index(sqlite_conn: Connection) -> None:
    # memory_update's kept copy, a hard delete and the version chain look rows up by superseded_by.
    seen: list[tuple[str, Any]] = []

    def record(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_args: Any) -> None:
        if "superseded_by = ?" in statement:
            seen.append((statement, parameters))

    event.listen(sqlite_conn, "before_cursor_execute", record)
    try:
        with sqlite_conn.begin():
            rows.version_chain(sqlite_conn, IDS[0])
            rows.hard_delete(sqlite_conn, IDS[1])
    finally:
        event.remove(sqlite_conn, "before_cursor_execute", record)
    assert [statement.split()[0] for statement, _ in seen] == ["SELECT", "UPDATE"], seen
    for statement, params in seen:
        plan = [str(step[3]) for step in sqlite_conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement,
                                                                      params).all()]
        assert any("ix_memories_superseded_by" in step for step in plan), (statement, plan)


def test_the_observer_walks_conversation_memories_on_from_its_watermark(sqlite_conn: Connection) -> None:
    from m3.cognition.observer import _memory_rows  # the loop's read of new conversation turns

    plan = plan_of(sqlite_conn, lambda c: _memory_rows(c, 1000, 50))
    assert plan == ["SEARCH memories USING INTEGER PRIMARY KEY (rowid>?)"], plan


@pytest.mark.parametrize("flt", [MemoryFilter(type="note"), MemoryFilter(type="note", agent_id="a", user_id="u"),
                                 MemoryFilter(conversation_id="c1"), MemoryFilter(agent_id="a"),
                                 MemoryFilter(agent_id="a", user_id="u")],
                         ids=["type", "owner", "conversation", "agent", "agent-and-user"])
def test_the_share_of_a_filter_is_counted_in_an_index_alone(sqlite_conn: Connection, flt: MemoryFilter) -> None:
    # The Searcher asks before each filtered search whether the filter holds much of the store.
    plan = plan_of(sqlite_conn, lambda c: rows.holds_more_than(c, flt, 1000))
    assert any("COVERING INDEX" in step for step in plan), plan
    assert not any(step.startswith("SCAN memories") for step in plan), plan



def test_a_reindexed_files_chunks_are_found_by_path_not_among_every_chunk_of_the_owner(
        sqlite_conn: Connection) -> None:
    from m3.protocols.messages.files import FILE_CHUNK, IndexFiles
    from m3.store import file_chunk_writes

    with sqlite_conn.begin():
        rows.insert_memories(sqlite_conn, [
            rows.memory_values(NewMemory(type=FILE_CHUNK, content=f"chunk {i}", agent_id="a", source=f"/r/f{i}.md"),
                               memory_id=IDS[i], digest=rows.content_hash(f"chunk {i}"), now=datetime.now(UTC))
            for i in range(3)])
        msg = IndexFiles(retire_paths=("/r/f1.md", "/r/f2.md"), agent_id="a", actor="a")
        plan = plan_of(sqlite_conn, lambda c: file_chunk_writes._retire(c, msg, datetime.now(UTC)))
    assert any("ix_memories_source" in step for step in plan), plan
