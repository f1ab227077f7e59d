"""Memory rows: counting what a filter admits, and the stored types, on both stores."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import Engine

from m3.protocols.messages.memory import MemoryFilter, NewMemory
from m3.store import memories as rows

NOW = datetime(2026, 1, 1, tzinfo=UTC)
IDS = [f"00000000-0000-4000-8000-{i:012d}" for i in range(4)]


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
