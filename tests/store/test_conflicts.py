"""Listing and resolving conflict candidates: keep both, or keep one by superseding the other."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import Connection, create_engine
from sqlalchemy.pool import NullPool

from m3.actors.system import ActorSystem
from m3.errors import InvalidArgument, NotFound
from m3.protocols.messages.conflicts import ListConflicts
from m3.protocols.messages.memory import WriteOutcome
from m3.store.conflict_writes import resolve_conflict
from m3.store.conflicts import get_conflict, list_conflicts
from tests.actors.conftest import WAIT_S, write_one
from tests.stored import memory

FIRST, SECOND = "Customer 4411 ordered 3 laptops on 2026-11-02.", "Customer 4412 ordered 3 laptops on 2026-11-02."
ANYONE = ListConflicts(status="all")


def write(system: ActorSystem, content: str, **fields: Any) -> WriteOutcome:
    out: WriteOutcome = system.writer.ask(write_one(content, **fields), WAIT_S)[0]
    system.wait_embedded()
    return out


@pytest.fixture
def transaction(store_url: str) -> Iterator[Connection]:
    """A connection in a transaction that commits at the end of the test (unless it failed)."""
    engine = create_engine(store_url, poolclass=NullPool)
    try:
        with engine.begin() as conn:
            yield conn
    finally:
        engine.dispose()


@pytest.fixture
def pair(system: ActorSystem) -> tuple[str, str]:
    """Two distinct facts written one after the other (one open conflict): (older id, newer id)."""
    first = write(system, FIRST, type="fact", agent_id="ops")
    second = write(system, SECOND, type="fact", agent_id="ops")
    system.stop()  # the store is ours from here on
    return first.id, second.id


def only_conflict(conn: Connection) -> dict[str, Any]:
    [found] = list_conflicts(conn, ANYONE)
    return found


def clock() -> datetime:
    return datetime.now(UTC)


def test_keep_both_closes_the_conflict_and_retires_nothing(
        pair: tuple[str, str], transaction: Connection, store_url: str) -> None:
    found = only_conflict(transaction)
    done = resolve_conflict(transaction, found["id"], "keep_both", actor="reviewer", clock=clock)
    assert (done["status"], done["resolution"], done["resolved_by"]) == ("resolved", "keep_both", "reviewer")
    assert list_conflicts(transaction, ListConflicts()) == []
    transaction.commit()
    assert [memory(store_url, i)["retired_at"] for i in pair] == [None, None]


@pytest.mark.parametrize(("resolution", "kept_index"), [("keep_a", 0), ("keep_b", 1)])
def test_keeping_one_side_supersedes_the_other_by_it(
        pair: tuple[str, str], store_url: str, resolution: str, kept_index: int) -> None:
    kept, dropped = pair[kept_index], pair[1 - kept_index]
    engine = create_engine(store_url, poolclass=NullPool)
    with engine.begin() as conn:
        resolve_conflict(conn, only_conflict(conn)["id"], resolution, actor="reviewer", clock=clock)
    engine.dispose()
    assert memory(store_url, kept)["retired_at"] is None
    gone = memory(store_url, dropped)
    assert (gone["retire_reason"], gone["superseded_by"]) == ("superseded", kept)


def test_a_resolved_conflict_cannot_be_resolved_again(pair: tuple[str, str], transaction: Connection) -> None:
    found = only_conflict(transaction)
    resolve_conflict(transaction, found["id"], "keep_b", actor="reviewer", clock=clock)
    with pytest.raises(InvalidArgument):
        resolve_conflict(transaction, found["id"], "keep_a", actor="reviewer", clock=clock)


def test_an_unknown_resolution_or_id_is_a_coded_error(pair: tuple[str, str], transaction: Connection) -> None:
    found = only_conflict(transaction)
    with pytest.raises(InvalidArgument):
        resolve_conflict(transaction, found["id"], "keep_neither", actor=None, clock=clock)
    with pytest.raises(NotFound):
        resolve_conflict(transaction, "no-such-conflict", "keep_both", actor=None, clock=clock)
    assert get_conflict(transaction, found["id"])["status"] == "open"


def test_listing_filters_by_memory_status_and_kind(pair: tuple[str, str], transaction: Connection) -> None:
    older, newer = pair
    flt = ListConflicts()
    assert len(list_conflicts(transaction, ListConflicts(memory_id=older))) == 1
    assert len(list_conflicts(transaction, ListConflicts(memory_id=newer))) == 1
    assert list_conflicts(transaction, ListConflicts(kind="contradiction")) == []
    assert list_conflicts(transaction, ListConflicts(agent_id="someone")) == []
    assert len(list_conflicts(transaction, flt)) == 1
