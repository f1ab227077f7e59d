"""The decay pass on the real Writer and store: what it archives and why, what it never archives, its budget,
its wrap-around cursor and its injected clock."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import select, update

from m3.actors.supervisor import ActorHandle
from m3.cognition.decay import DecayPass, DecayRules, cursor, decayed_importance
from m3.cognition.passes import PassContext
from m3.errors import ConfigError
from m3.protocols.messages.archive import ArchiveResult
from m3.protocols.messages.memory import TouchMemories
from m3.store.engine import StoreOptions
from m3.store.schema import memories, memory_history
from tests.actors.conftest import WAIT_S, write_one
from tests.cognition.loop_driver import Driver
from tests.stored import fresh, memory

DAY = timedelta(days=1)


@pytest.fixture
def writer(start_writer: Any) -> ActorHandle:
    handle: ActorHandle = start_writer()
    return handle


@pytest.fixture
def driver(store_options: StoreOptions, writer: ActorHandle) -> Iterator[Driver]:
    made = Driver(DecayPass(), store_options, writer)
    yield made
    made.close()


def write(writer: ActorHandle, content: str, **fields: Any) -> str:
    memory_id: str = writer.ask(write_one(content, **fields), WAIT_S)[0].id
    return memory_id


def archive_state(url: str, memory_id: str) -> tuple[Any, Any]:
    row = memory(url, memory_id)
    return row["archived_at"], row["archive_reason"]


def events(url: str, memory_id: str) -> list[dict[str, Any]]:
    with fresh(url) as conn:
        return [dict(r) for r in conn.execute(select(memory_history).where(memory_history.c.memory_id == memory_id)
                                              .order_by(memory_history.c.seq)).mappings()]


def test_decayed_importance_halves_with_every_half_life_of_non_use() -> None:
    used = datetime(2026, 1, 1, tzinfo=UTC)
    assert decayed_importance(0.8, used, used + 90 * DAY, 90.0) == pytest.approx(0.4)
    assert decayed_importance(0.8, used, used + 180 * DAY, 90.0) == pytest.approx(0.2)
    # A clock behind the last use decays nothing.
    assert decayed_importance(0.8, used, used - DAY, 90.0) == pytest.approx(0.8)


def test_an_unused_unimportant_memory_is_archived_as_decayed_and_history_says_why(
        driver: Driver, writer: ActorHandle, store_options: StoreOptions) -> None:
    faint = write(writer, "The old printer on floor 2 needs A4 paper.", importance=0.1)
    strong = write(writer, "Production deploys need two approvals.", importance=0.9)
    pinned = write(writer, "Always answer in British English.", importance=0.1, pinned=True)
    standing = write(writer, "To release: tag, build, publish.", importance=0.1, type="procedure")
    # 0.1 × 0.5^(100/90) = 0.046 < 0.05; 0.9 decays to 0.41.
    done = driver.tick(datetime.now(UTC) + 100 * DAY)
    assert (done.step.seen, done.produced, done.step.more) == (4, 1, False)
    assert done.replies == [ArchiveResult(archived=(faint,))]
    archived_at, reason = archive_state(store_options.url, faint)
    assert archived_at is not None and reason == "decayed"
    for kept in (strong, pinned, standing):
        assert archive_state(store_options.url, kept) == (None, None)
    [event] = [e for e in events(store_options.url, faint) if e["event"] == "archived"]
    assert event["actor"] == "m3:decay"
    assert event["details"]["reason"] == "decayed"
    assert event["details"]["decayed_importance"] == pytest.approx(0.1 * 0.5 ** (100 / 90), abs=1e-4)
    # The row is still current and still there.
    assert memory(store_options.url, faint)["retired_at"] is None


def test_the_defaults_never_archive_a_memory_used_within_weeks_whatever_its_importance(
        driver: Driver, writer: ActorHandle, store_options: StoreOptions) -> None:
    nothing = write(writer, "A throwaway note of no importance.", importance=0.0)
    ordinary = write(writer, "The team lunch is on Thursdays.", importance=0.5)
    start = datetime.now(UTC)
    assert driver.tick(start + 29 * DAY).produced == 0
    # Half a year unused: the default importance 0.5 has decayed to 0.12, still above 0.05.
    done = driver.tick(start + 182 * DAY)
    assert done.replies == [ArchiveResult(archived=(nothing,))]
    assert archive_state(store_options.url, ordinary) == (None, None)


def test_a_memory_used_recently_is_judged_by_its_last_use_not_by_when_it_was_written(
        driver: Driver, writer: ActorHandle, store_options: StoreOptions) -> None:
    read = write(writer, "The wiki moved to the new domain.", importance=0.1)
    unread = write(writer, "The wiki had a blue theme.", importance=0.1)
    later = datetime.now(UTC) + 200 * DAY
    writer.ask(TouchMemories(ids=(read,), at=later - 10 * DAY), WAIT_S)
    assert driver.tick(later).replies == [ArchiveResult(archived=(unread,))]
    assert archive_state(store_options.url, read) == (None, None)


def test_an_expired_memory_is_archived_as_expired_even_when_pinned(
        driver: Driver, writer: ActorHandle, store_options: StoreOptions) -> None:
    soon = datetime.now(UTC) + DAY
    offer = write(writer, "The conference discount code is EARLY26.", pinned=True, importance=1.0, expires_at=soon)
    chunkish = write(writer, "A procedure that expires.", type="procedure", expires_at=soon)
    lasting = write(writer, "The conference is in Porto.", importance=1.0, expires_at=soon + 30 * DAY)
    assert driver.tick(soon - timedelta(seconds=1)).produced == 0
    done = driver.tick(soon)
    assert done.replies == [ArchiveResult(archived=(offer, chunkish))]
    assert archive_state(store_options.url, offer)[1] == "expired"
    assert archive_state(store_options.url, lasting) == (None, None)


def test_each_tick_reads_at_most_its_budget_and_the_cursor_wraps_around_to_cover_the_whole_store(
        driver: Driver, writer: ActorHandle, store_options: StoreOptions) -> None:
    ids = [write(writer, f"Unused note number {i} about topic {i * 7}.", importance=0.01) for i in range(5)]
    later = datetime.now(UTC) + 60 * DAY
    seen = []
    for expected in ((2, True), (2, True), (1, False)):
        done = driver.tick(later, budget=2, settings={"archive_below": 0.0})  # 0: nothing decays away
        assert (done.step.seen, done.step.more) == expected
        seen.append(done.step.seen)
    assert driver.watermark() == {"after_seq": 0}
    # A new sweep starts at the beginning: this time archiving, two a tick.
    ticks = list(driver.sweep(later, budget=2))
    assert [t.produced for t in ticks] == [2, 2, 1]
    assert [i for t in ticks for r in t.replies for i in r.archived] == ids
    # Archived memories are no longer read: the next sweep sees nothing.
    assert driver.tick(later, budget=2).step.seen == 0


def test_a_memory_used_or_pinned_after_the_pass_read_it_is_left_alone_by_the_writer(
        writer: ActorHandle, store_options: StoreOptions, driver: Driver) -> None:
    touched = write(writer, "Touched between the read and the write.", importance=0.01)
    pinned = write(writer, "Pinned between the read and the write.", importance=0.01)
    later = datetime.now(UTC) + 90 * DAY
    with driver.engine.connect() as conn, conn.begin():
        step = DecayPass().step(conn, PassContext(now=later, budget=10))
    writer.ask(TouchMemories(ids=(touched,), at=later), WAIT_S)
    with fresh(store_options.url) as conn:  # pinned outside the pass's snapshot
        conn.execute(update(memories).where(memories.c.id == pinned).values(pinned=True))
        conn.commit()
    [reply] = [writer.ask(request, WAIT_S) for request in step.writes]
    assert reply == ArchiveResult(archived=(), skipped=(touched, pinned))
    assert driver.watermark() == {"after_seq": 0}


@pytest.mark.parametrize(("settings", "word"), [
    ({"half_life_days": 0}, "half_life_days"),
    ({"half_life_days": -3}, "half_life_days"),
    ({"archive_below": 1.5}, "archive_below"),
    ({"min_idle_days": -1}, "min_idle_days"),
    ({"half_life_days": "soon"}, "not numbers"),
])
def test_nonsense_settings_are_a_config_error_with_a_hint(settings: dict[str, Any], word: str) -> None:
    with pytest.raises(ConfigError) as err:
        DecayRules.of(settings)
    assert word in err.value.message
    assert err.value.hint


def test_a_missing_or_unreadable_watermark_starts_a_fresh_sweep() -> None:
    assert [cursor(w) for w in (None, {}, {"after_seq": -1}, {"after_seq": "7"}, [], {"after_seq": 7})] == [
        0, 0, 0, 0, 0, 7]


def test_a_tick_with_no_budget_reads_and_writes_nothing(driver: Driver) -> None:
    done = driver.tick(datetime.now(UTC), budget=0)
    assert (done.step.seen, done.step.writes, done.replies) == (0, (), [])
