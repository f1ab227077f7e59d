"""The Writer: group commit, answers only after commit, one bad request failing alone, read-your-writes."""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest
from sqlalchemy import select, text
from sqlalchemy.exc import OperationalError

from m3.actors.base import ThreadReply
from m3.actors.supervisor import ActorHandle
from m3.actors.system import ActorSystem
from m3.actors.writer import Writer
from m3.errors import InvalidArgument, NotFound, StoreError, Timeout
from m3.protocols.messages.memory import (
    Flush,
    MemoryFilter,
    NewMemory,
    PinMemory,
    SearchMemories,
    StoreVectors,
    UpdateMemory,
    WriteMemories,
    WriteOutcome,
)
from m3.store import schema
from m3.store.engine import StoreOptions
from tests.actors.conftest import WAIT_S, write_one
from tests.stored import count, dump, existing_ids, fresh, is_postgres, sqlite_path


class BatchRecordingWriter(Writer):
    """The real Writer, recording the size of every transaction it runs."""

    def __init__(self, *args: Any, batches: list[int], **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.batches = batches

    def _run(self, batch: list[Any]) -> Any:
        self.batches.append(len(batch))
        return super()._run(batch)


@contextmanager
def write_lock_held(url: str) -> Iterator[None]:
    """Another connection blocks every write: the Writer's next transaction waits for it.

    SQLite: that connection holds the file's write lock (``BEGIN IMMEDIATE``), so the Writer's own
    BEGIN IMMEDIATE waits. PostgreSQL has no store-wide write lock; an EXCLUSIVE lock on ``memories``
    (readers still read) makes the Writer's first write wait the same way.
    """
    if not is_postgres(url):
        other = sqlite3.connect(sqlite_path(url), isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")
            yield
            other.execute("ROLLBACK")
        finally:
            other.close()
        return
    with fresh(url) as conn:
        conn.execute(text("LOCK TABLE memories IN EXCLUSIVE MODE"))
        yield


def send(handle: ActorHandle, message: Any) -> ThreadReply:
    reply = ThreadReply()
    handle.tell(message, reply)
    return reply


def run_threads(n: int, target: Callable[[int], None]) -> None:
    threads = [threading.Thread(target=target, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads)


def test_every_write_acknowledged_to_sixteen_threads_is_readable_by_a_fresh_connection_at_once(
        system: ActorSystem, store_url: str) -> None:
    problems: list[str] = []

    def client(t: int) -> None:
        for i in range(15):
            try:
                out: list[WriteOutcome] = system.writer.ask(write_one(f"thread {t} write {i}", type="event"), WAIT_S)
            except Exception as exc:
                problems.append(repr(exc))
                continue
            if not existing_ids(store_url, [out[0].id]):
                problems.append(f"{out[0].id} acknowledged but not readable")

    run_threads(16, client)
    assert problems == []
    assert count(store_url, "memories") == 240
    assert count(store_url, "memory_history", "event = 'created'") == 240


def test_writes_queued_while_the_writer_waits_for_the_lock_commit_in_one_transaction(
        start_writer: Callable[..., ActorHandle], store_options: StoreOptions) -> None:
    batches: list[int] = []
    writer = start_writer(BatchRecordingWriter, batches=batches)
    with write_lock_held(store_options.url):
        replies = [send(writer, write_one(f"queued write {i}")) for i in range(50)]
        for r in replies:  # nothing can commit while the lock is held, so nothing may be answered yet
            with pytest.raises(Timeout):
                r.wait(0)
    ids = [r.wait(WAIT_S)[0].id for r in replies]
    assert existing_ids(store_options.url, ids) == set(ids)
    assert sum(batches) == 50
    assert len(batches) <= 2  # whatever reached the writer before the lock, then everything else at once


def test_a_batch_never_exceeds_max_batch(start_writer: Callable[..., ActorHandle],
                                         store_options: StoreOptions) -> None:
    batches: list[int] = []
    writer = start_writer(BatchRecordingWriter, max_batch=8, batches=batches)
    with write_lock_held(store_options.url):
        replies = [send(writer, write_one(f"bounded write {i}")) for i in range(50)]
    for r in replies:
        r.wait(WAIT_S)
    assert sum(batches) == 50
    assert max(batches) <= 8
    assert len(batches) >= 7


def test_one_bad_request_in_a_batch_fails_alone_and_the_others_commit(
        start_writer: Callable[..., ActorHandle], store_options: StoreOptions) -> None:
    batches: list[int] = []
    writer = start_writer(BatchRecordingWriter, batches=batches)
    target = writer.ask(write_one("a memory the bad requests aim at"), WAIT_S)[0].id
    before = dump(store_options.url)
    with write_lock_held(store_options.url):
        good = [send(writer, write_one(f"good write {i}")) for i in range(3)]
        unknown = send(writer, PinMemory(id="00000000-0000-4000-8000-000000000000", pinned=True))
        bad_field = send(writer, UpdateMemory(id=target, changes={"pinned": True}))
        not_json = send(writer, UpdateMemory(id=target, changes={"metadata": {"x": object()}}))
        more = [send(writer, write_one(f"later good write {i}")) for i in range(3)]
    with pytest.raises(NotFound):
        unknown.wait(WAIT_S)
    with pytest.raises(InvalidArgument):
        bad_field.wait(WAIT_S)
    with pytest.raises(StoreError):  # not an M3 error inside: the batch is retried one request at a time
        not_json.wait(WAIT_S)
    ids = [r.wait(WAIT_S)[0].id for r in good + more]
    assert existing_ids(store_options.url, ids) == set(ids)
    after = dump(store_options.url)
    assert [r for r in after["memories"] if r[1] == target] == [r for r in before["memories"] if r[1] == target]
    assert [r for r in after["memory_history"] if r[1] == target] == [
        r for r in before["memory_history"] if r[1] == target]
    stats = writer.statistics()
    assert (stats["handled"], stats["failed"]) == (7, 3)


def test_identical_writes_in_one_batch_store_one_memory(start_writer: Callable[..., ActorHandle],
                                                        store_options: StoreOptions) -> None:
    writer = start_writer()
    with write_lock_held(store_options.url):
        replies = [send(writer, write_one("said twice in one breath")) for _ in range(2)]
    first, second = (r.wait(WAIT_S)[0] for r in replies)
    assert (first.created, second.created) == (True, False)
    assert first.id == second.id
    assert count(store_options.url, "memories") == 1


def test_one_request_writing_several_memories_is_all_or_nothing(start_writer: Callable[..., ActorHandle],
                                                                store_options: StoreOptions) -> None:
    writer = start_writer()
    bad = WriteMemories(memories=(NewMemory(type="note", content="fine"),
                                  NewMemory(type="note", content="broken", metadata={"x": object()})))
    with pytest.raises(StoreError):
        writer.ask(bad, WAIT_S)
    assert count(store_options.url, "memories") == 0
    assert count(store_options.url, "memory_history") == 0


def test_flush_is_answered_after_every_write_sent_before_it_is_committed(
        start_writer: Callable[..., ActorHandle], store_options: StoreOptions) -> None:
    writer = start_writer()
    replies = [send(writer, write_one(f"before the flush {i}")) for i in range(30)]
    assert writer.ask(Flush(), WAIT_S) is True
    assert count(store_options.url, "memories") == 30
    assert all(r.wait(0) for r in replies)


FACTS = [
    "The staging cluster runs on three bare-metal nodes in Frankfurt.",
    "Alice prefers code reviews in the morning before standup.",
    "Our invoices are generated on the first business day of each month.",
    "The mobile app uses React Native with a custom navigation layer.",
    "Backups are encrypted with age and copied to two regions.",
    "The marketing site is a static Astro build deployed to a CDN.",
    "Customer support escalations go to the on-call engineer after 30 minutes.",
    "We pin Python dependencies with uv lock files.",
    "The data warehouse refreshes every night at 02:00 UTC.",
    "Feature flags are managed in LaunchDarkly and reviewed quarterly.",
    "The team retrospective happens every second Friday.",
    "Log retention for audit events is ninety days.",
]


def test_a_search_sent_after_a_write_is_acknowledged_finds_it_by_keyword(system: ActorSystem) -> None:
    for fact in FACTS:
        system.writer.ask(write_one(fact), WAIT_S)
    system.wait_embedded()  # the older memories have vectors; the new ones below not yet
    problems: list[str] = []

    def client(t: int) -> None:
        for i in range(5):
            keyword = f"zq{t}x{i}"
            text = f"The VPN gateway for the {keyword} office uses WireGuard on port {5000 + 10 * t + i}."
            written = system.writer.ask(write_one(text, type="event"), WAIT_S)[0]
            found = system.searcher.ask(SearchMemories(query=f"{keyword} VPN", k=3, filter=MemoryFilter()), WAIT_S)
            if [item.id for item in found.items][:1] != [written.id]:
                problems.append(keyword)

    run_threads(4, client)
    assert problems == []


def test_a_store_locked_past_the_busy_timeout_fails_the_batch_once_and_the_writer_recovers(
        start_writer: Callable[..., ActorHandle], store_options: StoreOptions,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.CRITICAL, logger="m3.actors")
    batches: list[int] = []
    writer = start_writer(BatchRecordingWriter, batches=batches,
                          options=StoreOptions(url=store_options.url, busy_timeout_ms=200))
    with write_lock_held(store_options.url):  # another process holds the lock for longer than 200 ms
        replies = [send(writer, write_one(f"blocked write {i}")) for i in range(20)]
        errors = []
        for r in replies:
            with pytest.raises(StoreError) as err:
                r.wait(WAIT_S)
            errors.append(err.value)
    assert all("locked" in e.message for e in errors)
    assert len(batches) <= 2  # a lock is nobody's fault: no request-by-request retry behind it
    assert count(store_options.url, "memories") == 0
    assert writer.ask(write_one("after the lock"), WAIT_S)[0].created


class LosesOneRace(Writer):
    """The real Writer whose first transaction loses a deadlock, as PostgreSQL reports it (SQLSTATE 40P01)."""

    def __init__(self, *args: Any, attempts: list[int], **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.attempts = attempts

    def _run(self, batch: list[Any]) -> Any:
        self.attempts.append(len(batch))
        if len(self.attempts) == 1:
            with self.conn.begin():
                self._apply_unit(self.conn, [batch[0].message])
                raise OperationalError("COMMIT", {}, DeadlockDetected())
        return super()._run(batch)


class DeadlockDetected(Exception):
    sqlstate = "40P01"


def test_a_vector_another_writer_committed_since_this_writer_last_wrote_is_a_supersession_candidate(
        start_writer: Callable[..., ActorHandle], store_options: StoreOptions) -> None:
    ours, theirs = start_writer(), start_writer()  # two Writers on one store, as two processes have
    older = theirs.ask(write_one("The API uses the old PostgreSQL version", type="fact", agent_id="ops"), WAIT_S)[0].id
    newer = ours.ask(write_one("The API uses the newest PostgreSQL version", type="fact", agent_id="ops"),
                     WAIT_S)[0].id
    unrelated = ours.ask(write_one("Lunch is at noon", type="fact", agent_id="ops"), WAIT_S)[0].id
    rng = np.random.default_rng(3)
    base, other = rng.standard_normal(16), rng.standard_normal(16)
    pair = np.stack([base + 0.02 * rng.standard_normal(16) for _ in range(2)] + [other])
    pair = (pair / np.linalg.norm(pair, axis=1, keepdims=True)).astype("<f4")

    def store(writer: ActorHandle, memory_id: str, row: int) -> None:
        writer.ask(StoreVectors(model="test-model", dim=16, ids=(memory_id,), vectors=pair[row].tobytes()), WAIT_S)

    store(ours, unrelated, 2)  # our Writer has read every vector committed so far
    store(theirs, older, 0)  # then the other one commits a vector
    store(ours, newer, 1)
    m = schema.memories
    with fresh(store_options.url) as conn:
        current = {r[0] for r in conn.execute(select(m.c.id).where(m.c.retired_at.is_(None)))}
    assert current == {newer, unrelated}


@pytest.mark.store_only("postgres", reason="only PostgreSQL's writers race; SQLite's wait for its one write lock")
def test_a_transaction_that_lost_a_deadlock_runs_again_and_commits_once(
        start_writer: Callable[..., ActorHandle], store_options: StoreOptions) -> None:
    attempts: list[int] = []
    writer = start_writer(LosesOneRace, attempts=attempts)
    out = writer.ask(write_one("written despite a lost race"), WAIT_S)[0]
    assert out.created
    assert attempts == [1, 1]
    assert count(store_options.url, "memories") == 1  # the first attempt was rolled back
    assert count(store_options.url, "memory_history") == 1
