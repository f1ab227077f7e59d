"""The Writer: the one actor per store that changes memories.

Group commit: write requests accumulate while more messages wait in the
mailbox; when the mailbox is empty (or the batch is full) the batch runs in
one transaction, and one bad request fails alone:

* a request the Writer may refuse after writing part of it (supersede,
  update, delete, pin, link: unknown ids, retired memories) runs inside its
  own savepoint;
* the others (new memories, vectors, chat, read statistics) were validated
  before they were sent and run without one; consecutive ones of a kind run
  as one unit (one duplicate query, one executemany). Should one fail
  anyway, the transaction rolls back and every request of the batch runs
  again alone;
* a batch of one request needs no savepoint: its transaction rolls back.

After the commit the Writer tells the other actors what changed, then
answers every caller. An answer therefore always means "committed".
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.exc import OperationalError

from m3.actors import coordination_ops
from m3.actors.base import Envelope, M3Actor
from m3.actors.supervisor import ActorHandle
from m3.errors import M3Error, StoreError
from m3.protocols.base import Message
from m3.protocols.messages.memory import (
    ActivateModel,
    DeleteMemory,
    Flush,
    LinkMemories,
    MarkModelBuilding,
    MemoriesErased,
    MemoriesWritten,
    PinMemory,
    ShareMemory,
    StoreVectors,
    SupersedeMemory,
    TouchMemories,
    UpdateMemory,
    WriteChat,
    WriteMemories,
)
from m3.retrieval.per_dialect import candidates_for
from m3.retrieval.supersession import SupersessionPolicy, supersede_similar
from m3.store import chat_writes as chat_rows
from m3.store import embedding_models, grant_writes
from m3.store import memories as rows
from m3.store.dialect import Dialect, dialect_for
from m3.store.engine import OwnedConnection, StoreOptions
from m3.store.memory_writes import MemoryWrites

log = logging.getLogger(__name__)

BATCHED: tuple[type[Message], ...] = (
    WriteMemories, SupersedeMemory, UpdateMemory, DeleteMemory, PinMemory, LinkMemories, WriteChat, StoreVectors,
    TouchMemories, ShareMemory, *coordination_ops.OPERATIONS,
)


@dataclass
class Effects:
    """What a transaction changed, told to other actors after it commits."""

    embed_ids: list[str] = field(default_factory=list)
    embed_texts: list[str] = field(default_factory=list)
    erased: list[str] = field(default_factory=list)
    #: Agents that got a notification (their routers wake waiting callers).
    notified: list[str] = field(default_factory=list)

    def add_fresh(self, fresh: list[tuple[str, str]]) -> None:
        for memory_id, text in fresh:
            self.embed_ids.append(memory_id)
            self.embed_texts.append(text)

    def extend(self, other: Effects) -> None:
        self.embed_ids += other.embed_ids
        self.embed_texts += other.embed_texts
        self.erased += other.erased
        self.notified += other.notified


class Clock:
    """UTC time that never repeats or goes back within one Writer (orders bitemporal events)."""

    def __init__(self, now: Callable[[], datetime] | None = None):
        self._now = now or (lambda: datetime.now(UTC))
        self._last = datetime.min.replace(tzinfo=UTC)

    def __call__(self) -> datetime:
        t = self._now()
        if t <= self._last:
            t = self._last + timedelta(microseconds=1)
        self._last = t
        return t


class Writer(M3Actor):
    def __init__(self, options: StoreOptions, *, max_batch: int, policy: SupersessionPolicy,
                 searcher: ActorHandle | None, embedder: ActorHandle | None,
                 on_notified: Callable[[tuple[str, ...]], None] | None = None, **base: Any):
        super().__init__(**base)
        self._max_batch = max(1, max_batch)
        self._policy = policy
        self._searcher = searcher
        self._embedder = embedder
        self._on_notified = on_notified
        self._pending: list[Envelope] = []
        self._owned = OwnedConnection(options, "writer")
        self._conn: Connection | None = None
        self._clock = Clock()
        self._dialect = dialect_for(options.url)
        self._candidates = candidates_for(self._dialect, policy.exempt_types)

    def setup(self) -> None:
        self._conn = self._owned.open()

    def release(self) -> None:
        self._conn = None
        self._owned.close()

    def handlers(self) -> dict[type[Message], Callable[[Any], Any]]:
        return {Flush: lambda _msg: True, ActivateModel: self._activate_model, MarkModelBuilding: self._mark_building}

    def _activate_model(self, msg: ActivateModel) -> bool:
        assert self._conn is not None
        with self._conn.begin():
            done = embedding_models.activate(self._conn, msg.model, msg.dim, self._clock(),
                                             require_complete=msg.require_complete)
        if done:
            log.info("search now uses the vectors of %s", msg.model)
        return done

    def _mark_building(self, msg: MarkModelBuilding) -> None:
        assert self._conn is not None
        with self._conn.begin():
            embedding_models.mark_building(self._conn, msg.model, msg.dim, self._clock())

    # -- group commit --------------------------------------------------------------------------

    def receive(self, env: Envelope) -> None:
        if isinstance(env.message, BATCHED):
            self._pending.append(env)
            if self.inbox_empty() or len(self._pending) >= self._max_batch:
                self._flush()
            return
        self._flush()
        super().receive(env)

    def on_stop(self) -> None:
        self._flush()
        super().on_stop()

    def _flush(self) -> None:
        batch, self._pending = self._pending, []
        if not batch:
            return
        try:
            outcomes, effects = self._run_retrying(batch)
        except Exception as exc:
            if len(batch) == 1 or isinstance(exc, OperationalError):
                # The database refused the transaction itself (locked past the busy timeout, read-only,
                # disk full): every request would fail alike, so none is retried on its own.
                self._answer_all(batch, _errors_for(len(batch), exc, self._dialect))
                return
            log.warning("group commit of %d failed (%r); retrying one by one", len(batch), exc)
            for env in batch:
                self._pending = [env]
                self._flush()
            return
        self._publish(effects)
        self._answer_all(batch, outcomes)

    def _run_retrying(self, batch: list[Envelope]) -> tuple[list[Any], Effects]:
        """Run the batch; on PostgreSQL run it again when it lost a deadlock or serialization race."""
        for attempt in range(1, TRANSACTION_ATTEMPTS + 1):
            try:
                return self._run(batch)
            except OperationalError as exc:
                if attempt == TRANSACTION_ATTEMPTS or not self._dialect.retryable(exc):
                    raise
                log.info("write transaction lost a race (%s); running it again", type(exc.orig).__name__)
        raise AssertionError("unreachable")

    def _run(self, batch: list[Envelope]) -> tuple[list[Any], Effects]:
        conn = self._conn
        assert conn is not None
        if len(batch) == 1:
            return self._run_one(conn, batch[0])
        outcomes: list[Any] = [None] * len(batch)
        effects = Effects()
        with conn.begin():
            # Before anything is written: the candidates see committed data only, and on PostgreSQL
            # the transaction takes its advisory locks before any row lock.
            self._candidates.prepare(conn, [env.message for env in batch])
            for unit in work_units(batch):
                msgs = [batch[i].message for i in unit]
                if isinstance(msgs[0], REFUSABLE):
                    try:
                        with conn.begin_nested():
                            results, fx = self._apply_unit(conn, msgs)
                    except M3Error as exc:
                        outcomes[unit[0]] = exc
                        continue
                else:
                    # Validated before it was sent, not expected to fail: no savepoint. Should it fail anyway,
                    # the transaction rolls back and _flush runs every request of the batch alone.
                    results, fx = self._apply_unit(conn, msgs)
                for i, result in zip(unit, results, strict=True):
                    outcomes[i] = result
                effects.extend(fx)
        return outcomes, effects

    def _run_one(self, conn: Connection, env: Envelope) -> tuple[list[Any], Effects]:
        """A batch of one request: no savepoint (two statements saved); a refused request rolls back the
        whole transaction instead, which then holds nothing else."""
        try:
            with conn.begin():
                self._candidates.prepare(conn, [env.message])
                results, fx = self._apply_unit(conn, [env.message])
        except M3Error as exc:
            return [exc], Effects()
        return results, fx

    def _publish(self, fx: Effects) -> None:
        if fx.embed_ids and self._embedder is not None:
            self._embedder.tell(MemoriesWritten(ids=tuple(fx.embed_ids), texts=tuple(fx.embed_texts)))
        if fx.erased and self._searcher is not None:
            self._searcher.tell(MemoriesErased(ids=tuple(fx.erased)))
        if fx.notified and self._on_notified is not None:
            self._on_notified(tuple(dict.fromkeys(fx.notified)))

    def _answer_all(self, batch: list[Envelope], outcomes: list[Any]) -> None:
        for env, outcome in zip(batch, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                self.stats.failed += 1
                if env.reply is not None:
                    env.reply.set_exception(outcome)
                else:
                    log.error("%s failed: %r", type(env.message).__name__, outcome)
            else:
                self.stats.handled += 1
                if env.reply is not None:
                    env.reply.set_result(outcome)

    # -- applying requests ---------------------------------------------------------------------

    def _apply_unit(self, conn: Connection, msgs: list[Message]) -> tuple[list[Any], Effects]:
        """Apply requests that run together (see :func:`work_units`); one result per request."""
        if len(msgs) == 1:
            result, fx = self._apply(conn, msgs[0])
            return [result], fx
        if isinstance(msgs[0], StoreVectors):
            merged = merge_vectors([msg for msg in msgs if isinstance(msg, StoreVectors)])
            done = supersede_similar(conn, merged, self._policy, self._clock, self._candidates)
            return [None] * len(msgs), Effects(notified=done.notified)
        fx = Effects()
        results = []
        writes = [msg for msg in msgs if isinstance(msg, WriteMemories)]
        for outcomes, fresh in MemoryWrites(conn, self._clock).write_all(writes):
            results.append(outcomes)
            fx.add_fresh(fresh)
        return results, fx

    def _apply(self, conn: Connection, msg: Message) -> tuple[Any, Effects]:
        fx = Effects()
        coordination = coordination_ops.OPERATIONS.get(type(msg))
        if coordination is not None:
            result, fx.notified = coordination(conn, msg, self._clock())
            return result, fx
        ops = MemoryWrites(conn, self._clock)
        if isinstance(msg, WriteMemories):
            outcomes, fresh = ops.write(msg)
            fx.add_fresh(fresh)
            return outcomes, fx
        if isinstance(msg, SupersedeMemory):
            outcome, text = ops.supersede(msg)
            self._candidates.discard(msg.old_id)
            fx.embed_ids.append(outcome.id)
            fx.embed_texts.append(text)
            return outcome, fx
        if isinstance(msg, UpdateMemory):
            record, new_text = ops.update(msg)
            if new_text is not None:
                fx.embed_ids.append(record["id"])
                fx.embed_texts.append(new_text)
            return record, fx
        if isinstance(msg, DeleteMemory):
            kind = ops.delete(msg)
            self._candidates.discard(msg.id)
            if kind == "hard":
                fx.erased.append(msg.id)
            return kind, fx
        if isinstance(msg, PinMemory):
            return ops.pin(msg), fx
        if isinstance(msg, LinkMemories):
            return ops.link(msg), fx
        if isinstance(msg, StoreVectors):
            fx.notified = supersede_similar(conn, msg, self._policy, self._clock, self._candidates).notified
            return None, fx
        if isinstance(msg, TouchMemories):
            rows.touch(conn, msg.ids, msg.at)
            return None, fx
        if isinstance(msg, WriteChat):
            return chat_rows.append(conn, msg, self._clock()), fx
        if isinstance(msg, ShareMemory):
            return grant_writes.apply(conn, msg, self._clock()), fx
        raise TypeError(f"Writer cannot apply {type(msg).__name__}")


#: Requests the Writer may refuse (M3Error) after writing part of them: in a group, each gets a savepoint.
REFUSABLE = (SupersedeMemory, UpdateMemory, DeleteMemory, PinMemory, LinkMemories, ShareMemory)


def work_units(batch: list[Envelope]) -> list[list[int]]:
    """Positions in ``batch`` grouped into units applied at once: a run of consecutive WriteMemories, or of
    consecutive StoreVectors of one model and supersede flag; any other request alone. Order is kept."""
    units: list[list[int]] = []
    for i, env in enumerate(batch):
        if units and _mergeable(batch[units[-1][-1]].message, env.message):
            units[-1].append(i)
        else:
            units.append([i])
    return units


def _mergeable(a: Message, b: Message) -> bool:
    if isinstance(a, WriteMemories) and isinstance(b, WriteMemories):
        return True
    if isinstance(a, StoreVectors) and isinstance(b, StoreVectors):
        return (a.model, a.dim, a.supersede) == (b.model, b.dim, b.supersede)
    return False


def merge_vectors(msgs: list[StoreVectors]) -> StoreVectors:
    """One StoreVectors doing what ``msgs`` do in turn (of one model and flag): a memory given several
    vectors keeps the last."""
    width = msgs[0].dim * 4
    last: dict[str, bytes] = {}
    for msg in msgs:
        if len(msg.vectors) != width * len(msg.ids):
            raise ValueError(f"StoreVectors holds {len(msg.vectors)} bytes for {len(msg.ids)} vectors of {msg.dim}")
        for i, memory_id in enumerate(msg.ids):
            last.pop(memory_id, None)
            last[memory_id] = msg.vectors[i * width:(i + 1) * width]
    return StoreVectors(model=msgs[0].model, dim=msgs[0].dim, ids=tuple(last), vectors=b"".join(last.values()),
                        supersede=msgs[0].supersede)


#: How often a transaction that lost a deadlock or serialization race (PostgreSQL) is run.
TRANSACTION_ATTEMPTS = 4


def _errors_for(n: int, exc: Exception, dialect: Dialect) -> list[M3Error]:
    """One error per caller (an exception object is raised in one thread only), logged once."""
    first = _as_error(exc, dialect)
    return [first] + [type(first)(first.message, hint=first.hint, details=first.details) for _ in range(n - 1)]


def _as_error(exc: Exception, dialect: Dialect) -> M3Error:
    if isinstance(exc, M3Error):
        return exc
    log.error("write failed", exc_info=exc)
    known = dialect.store_error(exc)
    if known is not None:
        return known
    # The driver's own message, without SQLAlchemy's statement dump (it can hold user content).
    reason = getattr(exc, "orig", None) or exc
    return StoreError(f"the write failed: {type(reason).__name__}: {reason}")
