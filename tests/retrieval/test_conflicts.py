"""Similarity supersession keeps distinct facts: look-alike notes that disagree on an anchor both stay
current and become a conflict candidate; a pair that agrees supersedes and tells its writer."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from m3.actors.system import ActorSystem
from m3.protocols.messages.conflicts import ListConflicts
from m3.protocols.messages.memory import DeleteMemory, GetHistory, MemoryFilter, WriteOutcome
from m3.retrieval.supersession import MAX_CONFLICTS
from m3.store import schema
from m3.store.conflicts import list_conflicts
from tests.actors.conftest import WAIT_S, write_one
from tests.stored import fresh

FIRST, SECOND = "Customer 4411 ordered 3 laptops on 2026-11-02.", "Customer 4412 ordered 3 laptops on 2026-11-02."
OLD, NEW = "The API uses the old PostgreSQL version", "The API uses the newest PostgreSQL version"


def write(system: ActorSystem, content: str, actor: str = "tester", **fields: Any) -> WriteOutcome:
    out: WriteOutcome = system.writer.ask(write_one(content, actor=actor, **fields), WAIT_S)[0]
    system.wait_embedded()
    return out


def current_ids(url: str) -> set[str]:
    m = schema.memories
    with fresh(url) as conn:
        return {row[0] for row in conn.execute(select(m.c.id).where(m.c.retired_at.is_(None)))}


def conflicts(url: str, **flt: Any) -> list[dict[str, Any]]:
    with fresh(url) as conn:
        return list_conflicts(conn, ListConflicts(**flt))


def seen_by(reader: str | None, **fields: Any) -> ListConflicts:
    return ListConflicts(filter=MemoryFilter(reader_agent_id=reader, enforce_isolation=True), **fields)


def notifications(url: str, agent: str) -> list[dict[str, Any]]:
    n = schema.notifications
    with fresh(url) as conn:
        return [dict(r) for r in conn.execute(select(n).where(n.c.agent_id == agent).order_by(n.c.seq)).mappings()]


def test_notes_differing_only_in_a_number_both_stay_current_as_one_open_conflict(
        system: ActorSystem, store_url: str) -> None:
    first = write(system, FIRST, type="fact", agent_id="ops")
    second = write(system, SECOND, type="fact", agent_id="ops")
    assert current_ids(store_url) == {first.id, second.id}
    [found] = conflicts(store_url)
    assert (found["memory_a"], found["memory_b"], found["kind"], found["status"]) == (
        first.id, second.id, "near_duplicate", "open")
    assert found["reason"] == "number: 4411 vs 4412"
    assert found["similarity"] > 0.92
    assert found["agent_id"] == "ops"
    assert notifications(store_url, "tester") == []


def test_memory_history_of_both_sides_of_a_conflict_says_why_both_stay(system: ActorSystem) -> None:
    first = write(system, FIRST, type="fact")
    second = write(system, SECOND, type="fact")
    for mine, other in ((first.id, second.id), (second.id, first.id)):
        events = system.searcher.ask(GetHistory(id=mine), WAIT_S).events
        detected = [e for e in events if e.event == "conflict_detected"]
        assert len(detected) == 1
        assert detected[0].details["other"] == other
        assert detected[0].details["reason"] == "number: 4411 vs 4412"


def test_a_superseding_write_notifies_its_writer_naming_both_memories_and_history_says_why(
        system: ActorSystem, store_url: str) -> None:
    first = write(system, OLD, actor="agent-a", type="fact")
    second = write(system, NEW, actor="agent-a", type="fact")
    assert current_ids(store_url) == {second.id}
    [note] = notifications(store_url, "agent-a")
    assert note["kind"] == "superseded"
    assert (note["data"]["memory_id"], note["data"]["superseded"]) == (second.id, first.id)
    assert first.id in note["message"] and second.id in note["message"]
    old_events = system.searcher.ask(GetHistory(id=first.id), WAIT_S).events
    assert "anchors agree" in old_events[-1].details["reason"]
    new_events = system.searcher.ask(GetHistory(id=second.id), WAIT_S).events
    assert [e.event for e in new_events] == ["created", "supersedes"]
    assert new_events[-1].details["old"] == first.id
    assert conflicts(store_url) == []


def test_a_new_templated_note_records_at_most_a_few_conflicts_the_nearest_first(
        system: ActorSystem, store_url: str) -> None:
    for n in range(MAX_CONFLICTS + 3):
        write(system, f"Customer {4400 + n} ordered 3 laptops on 2026-11-02.", type="fact")
    assert len(current_ids(store_url)) == MAX_CONFLICTS + 3
    per_new: dict[str, int] = {}
    for found in conflicts(store_url):
        per_new[found["memory_b"]] = per_new.get(found["memory_b"], 0) + 1
    assert per_new and max(per_new.values()) <= MAX_CONFLICTS


def test_a_conflict_of_a_private_memory_is_listed_only_for_its_agent(system: ActorSystem, store_url: str) -> None:
    write(system, FIRST, type="fact", scope="agent", agent_id="ops")
    write(system, SECOND, type="fact", scope="agent", agent_id="ops")
    with fresh(store_url) as conn:
        assert len(list_conflicts(conn, seen_by("ops"))) == 1
        assert list_conflicts(conn, seen_by("intruder")) == []
        assert list_conflicts(conn, seen_by(None)) == []
        assert list_conflicts(conn, seen_by("ops", status="resolved")) == []


def test_erasing_a_memory_removes_the_conflicts_it_was_part_of(system: ActorSystem, store_url: str) -> None:
    first = write(system, FIRST, type="fact")
    write(system, SECOND, type="fact")
    assert len(conflicts(store_url)) == 1
    system.writer.ask(DeleteMemory(id=first.id, hard=True), WAIT_S)
    assert conflicts(store_url, status="all") == []
