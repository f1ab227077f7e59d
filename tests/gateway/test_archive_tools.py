"""Archived memories through the tools (the real service, both stores): hidden from default search on both
legs and from lists, shown with include_archived, described by memory_get, brought back by memory_restore."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import update

from m3.actors.system import ActorSystem
from m3.cognition.decay import DecayPass
from m3.errors import M3Error
from m3.gateway.service import Service
from m3.protocols.messages.memory import Flush
from m3.store.schema import memories
from tests.cognition.loop_driver import WAIT_S, Driver
from tests.gateway.outcomes import Run
from tests.helpers import call
from tests.stored import fresh

DAY = timedelta(days=1)
FADING = "The staging database password rotates every Tuesday."
KEYWORDS = "staging database password"
MEANING = "When do credentials for the test DB change?"


@pytest.fixture
def decay(system: ActorSystem) -> Iterator[Driver]:
    made = Driver(DecayPass(), system.options, system.writer)
    yield made
    made.close()


def ids(found: dict[str, Any]) -> list[str]:
    return [item["id"] for item in found["items"]]


@pytest.fixture
def archived(service: Service, system: ActorSystem, decay: Driver) -> dict[str, Any]:
    """A memory found by keyword and by meaning alone, then archived by the decay pass (40 idle days later)."""
    written = call(service, "memory_write", content=FADING, importance=0.01)
    call(service, "memory_write", content="The office plants are watered on Fridays.")
    system.wait_embedded()
    by_meaning = call(service, "memory_search", query=MEANING, k=1)
    assert ids(by_meaning) == [written["id"]] and by_meaning["items"][0]["bm25_score"] == 0  # the dense leg alone
    assert call(service, "memory_search", query=KEYWORDS, k=1)["items"][0]["bm25_score"] > 0
    # The searches' access records are committed first: a use after the pass's read would (rightly) spare it.
    system.writer.ask(Flush(), WAIT_S)
    done = decay.tick(datetime.now(UTC) + 40 * DAY)
    assert done.produced == 1
    return written


def test_an_archived_memory_is_hidden_from_default_search_by_keyword_and_by_meaning(
        service: Service, archived: dict[str, Any]) -> None:
    for query in (KEYWORDS, MEANING, FADING):
        assert archived["id"] not in ids(call(service, "memory_search", query=query, k=5))


def test_include_archived_finds_it_on_both_legs_and_says_it_is_archived(
        service: Service, archived: dict[str, Any]) -> None:
    by_meaning = call(service, "memory_search", query=MEANING, k=1, include_archived=True)
    assert ids(by_meaning) == [archived["id"]]
    assert by_meaning["items"][0]["archived_at"] is not None
    by_keyword = call(service, "memory_search", query=KEYWORDS, k=1, include_archived=True)
    assert ids(by_keyword) == [archived["id"]] and by_keyword["items"][0]["bm25_score"] > 0


def test_memory_get_shows_the_archive_state_and_memory_list_and_stats_keep_it_apart(
        service: Service, archived: dict[str, Any]) -> None:
    got = call(service, "memory_get", id=archived["id"])
    assert got["archive_reason"] == "decayed" and got["archived_at"] is not None and got["retired_at"] is None
    assert archived["id"] not in ids(call(service, "memory_list"))
    assert archived["id"] in ids(call(service, "memory_list", include_archived=True))
    stats = call(service, "memory_stats")
    assert (stats["current"], stats["archived"]) == (1, 1)


def test_as_of_before_the_archiving_still_finds_the_memory(service: Service, archived: dict[str, Any]) -> None:
    before = call(service, "memory_search", query=KEYWORDS, k=1, as_of=archived["recorded_at"])
    assert ids(before) == [archived["id"]]


def test_memory_restore_brings_it_back_on_both_legs_and_history_has_both_events(
        service: Service, archived: dict[str, Any]) -> None:
    assert call(service, "memory_restore", id=archived["id"][:8], reason="still rotating") == {
        "id": archived["id"], "retired_id": None}
    assert ids(call(service, "memory_search", query=MEANING, k=1)) == [archived["id"]]
    assert ids(call(service, "memory_search", query=KEYWORDS, k=1)) == [archived["id"]]
    got = call(service, "memory_get", id=archived["id"])
    assert (got["archived_at"], got["archive_reason"]) == (None, None)
    events = call(service, "memory_history", id=archived["id"])["events"]
    assert [e["event"] for e in events] == ["created", "archived", "restored"]
    restored = events[-1]
    assert (restored["details"]["was"], restored["details"]["archive_reason"], restored["details"]["reason"]) == (
        "archived", "decayed", "still rotating")
    # Restored, it is current and not archived: a second restore has nothing to do.
    with pytest.raises(M3Error) as again:
        call(service, "memory_restore", id=archived["id"])
    assert again.value.code == "not_retired" and "not archived" in again.value.message


def test_restoring_an_expired_memory_clears_its_expiry_so_it_stays_found(
        service: Service, system: ActorSystem, decay: Driver) -> None:
    soon = datetime.now(UTC) + timedelta(seconds=1)
    written = call(service, "memory_write", content="The early bird code is EARLY26.", expires_at=soon.isoformat())
    assert decay.tick(soon + DAY).produced == 1
    assert call(service, "memory_get", id=written["id"])["archive_reason"] == "expired"
    call(service, "memory_restore", id=written["id"])
    got = call(service, "memory_get", id=written["id"])
    assert (got["expires_at"], got["archived_at"]) == (None, None)
    assert ids(call(service, "memory_search", query="early bird code")) == [written["id"]]
    restored = call(service, "memory_history", id=written["id"])["events"][-1]
    assert restored["details"]["expires_at"] is not None  # the expiry it had is kept in history
    assert decay.tick(soon + 2 * DAY).produced == 0


def test_an_archived_memory_is_not_superseded_by_a_look_alike(
        service: Service, system: ActorSystem, archived: dict[str, Any]) -> None:
    call(service, "memory_write", content="The staging database password rotates every Tuesday night.")
    system.wait_embedded()
    assert call(service, "memory_get", id=archived["id"])["retired_at"] is None


def test_the_command_line_searches_archived_memories_with_include_archived(
        m3: Run, start_writer: Any, store_options: Any) -> None:
    written = m3("memory", "write", "--content", FADING, "--importance", "0.01").document()
    writer = start_writer()
    driver = Driver(DecayPass(), store_options, writer)
    try:
        assert driver.tick(datetime.now(UTC) + 40 * DAY).produced == 1
    finally:
        driver.close()
    assert written["id"] not in ids(m3("memory", "search", "--query", KEYWORDS).document())
    found = m3("memory", "search", "--query", KEYWORDS, "--include_archived").document()
    assert ids(found) == [written["id"]] and found["items"][0]["archived_at"] is not None
    assert m3("memory", "restore", "--id", written["id"]).document()["id"] == written["id"]
    assert ids(m3("memory", "search", "--query", KEYWORDS).document()) == [written["id"]]


def test_writing_the_exact_text_of_an_archived_memory_again_restores_it(
        service: Service, archived: dict[str, Any]) -> None:
    again = call(service, "memory_write", content=FADING)
    assert (again["id"], again["created"]) == (archived["id"], False)
    assert call(service, "memory_get", id=archived["id"])["archived_at"] is None
    assert ids(call(service, "memory_search", query=KEYWORDS, k=1)) == [archived["id"]]
    restored = call(service, "memory_history", id=archived["id"])["events"][-1]
    assert (restored["event"], restored["details"]["how"]) == ("restored", "rewritten")


def test_admin_verify_checks_that_the_archive_columns_are_set_together(
        service: Service, archived: dict[str, Any], store_url: str) -> None:
    [check] = [c for c in call(service, "admin_verify")["checks"] if c["check"] == "memories.archive_state"]
    assert check["status"] == "ok" and "1 archived" in check["message"]
    with fresh(store_url) as conn:  # changed outside m3
        conn.execute(update(memories).where(memories.c.id == archived["id"]).values(archive_reason=None))
        conn.commit()
    [check] = [c for c in call(service, "admin_verify")["checks"] if c["check"] == "memories.archive_state"]
    assert (check["status"], check["ids"]) == ("fail", [archived["id"]])
    assert check["hint"]
