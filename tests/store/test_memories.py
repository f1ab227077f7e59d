"""Memory rows looked up by id under a filter, on both stores."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import Engine

from m3.protocols.messages.memory import MemoryFilter, NewMemory
from m3.store import memories as rows
from m3.store.filters import search_clause

NOW = datetime(2026, 1, 1, tzinfo=UTC)
IDS = [f"00000000-0000-4000-8000-{i:012d}" for i in range(4)]


def test_rows_by_ids_give_each_asked_row_once_and_only_those_the_filter_admits(writer_engine: Engine) -> None:
    kinds = [("note", "a"), ("note", "b"), ("decision", "a"), ("note", "a")]
    with writer_engine.begin() as conn:
        rows.insert_memories(conn, [
            rows.memory_values(NewMemory(type=kind, content=f"text {i}", agent_id=agent), memory_id=IDS[i],
                               digest=rows.content_hash(f"text {i}"), now=NOW)
            for i, (kind, agent) in enumerate(kinds)])
        clause = search_clause(MemoryFilter(type="note", agent_id="a"), datetime.now(UTC))
        # Asked twice, asked and filtered out, never stored: each admitted row comes back once.
        asked = [IDS[0], IDS[1], IDS[0], IDS[2], "no-such-memory", IDS[3]]
        found = rows.rows_by_ids(conn, asked, clause)
        assert sorted(found) == [IDS[0], IDS[3]]
        assert found[IDS[0]]["content"] == "text 0" and found[IDS[3]]["agent_id"] == "a"
        assert rows.visible_ids(conn, asked, clause) == {IDS[0], IDS[3]}
        assert sorted(rows.rows_by_ids(conn, asked)) == IDS
        assert rows.rows_by_ids(conn, [], clause) == {} and rows.visible_ids(conn, [], clause) == set()


def test_a_filter_is_counted_in_an_index_up_to_a_cap_and_not_at_all_without_one(writer_engine: Engine) -> None:
    kinds = [("note", "a", "c1")] * 3 + [("decision", "b", "c2")]
    with writer_engine.begin() as conn:
        rows.insert_memories(conn, [
            rows.memory_values(NewMemory(type=kind, content=f"fact {i}", agent_id=agent, conversation_id=conv),
                               memory_id=f"00000000-0000-4000-8000-{i:012d}", digest=rows.content_hash(f"fact {i}"),
                               now=NOW)
            for i, (kind, agent, conv) in enumerate(kinds)])
        assert rows.holds_more_than(conn, MemoryFilter(type="note"), 2) is True
        assert rows.holds_more_than(conn, MemoryFilter(type="note"), 3) is False
        assert rows.holds_more_than(conn, MemoryFilter(type="note", agent_id="a"), 2) is True
        assert rows.holds_more_than(conn, MemoryFilter(conversation_id="c2"), 1) is False
        # The agent alone (or with the user) is counted type by type in the owner index.
        assert rows.holds_more_than(conn, MemoryFilter(agent_id="a"), 2) is True
        assert rows.holds_more_than(conn, MemoryFilter(agent_id="a"), 3) is False
        assert rows.holds_more_than(conn, MemoryFilter(agent_id="b"), 0) is True
        assert rows.holds_more_than(conn, MemoryFilter(agent_id="a", user_id="u"), 0) is False
        # No index holds the type with the user but not the agent: not counted.
        assert rows.holds_more_than(conn, MemoryFilter(type="note", user_id="u"), 1) is None
        assert rows.holds_more_than(conn, MemoryFilter(user_id="u"), 1) is None


def test_the_stored_types_are_each_type_once(writer_engine: Engine) -> None:
    with writer_engine.begin() as conn:
        assert list(conn.execute(rows.stored_types()).scalars()) == []
        rows.insert_memories(conn, [
            rows.memory_values(NewMemory(type=kind, content=f"fact {i}"), memory_id=IDS[i],
                               digest=rows.content_hash(f"fact {i}"), now=NOW)
            for i, kind in enumerate(["note", "decision", "note", "plan"])])
        assert sorted(conn.execute(rows.stored_types()).scalars()) == ["decision", "note", "plan"]


def test_one_id_reader_reads_every_list_it_is_given_under_its_filter_and_chunks_long_ones(
        writer_engine: Engine) -> None:
    many = [f"00000000-0000-4000-9000-{i:012d}" for i in range(rows.CHUNK + 20)]
    with writer_engine.begin() as conn:
        rows.insert_memories(conn, [
            rows.memory_values(NewMemory(type="note" if i % 3 else "decision", content=f"row {i}"), memory_id=m,
                               digest=rows.content_hash(f"row {i}"), now=NOW)
            for i, m in enumerate(many)])
        notes = {m for i, m in enumerate(many) if i % 3}
        read = rows.IdReader(conn, search_clause(MemoryFilter(type="note"), datetime.now(UTC)),
                             columns=rows.RANKING_COLUMNS)
        assert set(read(many[:10])) == notes & set(many[:10])
        assert set(read(many[10:40])) == notes & set(many[10:40])
        everything = read(many)  # more ids than one statement takes: run once per chunk
        assert set(everything) == notes and set(everything[many[1]]) == {c.name for c in rows.RANKING_COLUMNS}
        assert read([]) == {}
