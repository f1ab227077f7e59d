"""The Writer: the one actor per store that changes it (memories, chat, agents, inboxes, tasks).

Every request kind it commits has one entry in ``OPERATIONS``: the store function that applies it,
whether it may be refused part-way, whether consecutive ones merge, and the effects it reports. Group
commit: requests accumulate while more messages wait (up to ``writer.max_batch``) and run in one
transaction in which one bad request fails alone (see :meth:`Writer._run`, docs/architecture.md "The
actors"). After the commit the Writer tells the other actors what changed, then answers every caller:
an answer always means "committed".

Vectors from the Embedder (a :class:`mem.StoreVectors` nobody waits for) are deferred work: they gather for up
to :data:`VECTOR_DELAY_S` (or ``writer.max_batch`` vectors) and commit in a transaction of their own, after
the requests someone waits for, so an acknowledgement never waits behind a unit of vectors that merely queued
before it (docs/architecture.md, "The actors").
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.exc import OperationalError

from m3.actors.base import EarliestTimer, Envelope, Reply
from m3.actors.reader import ConnectionOwner
from m3.actors.supervisor import ActorHandle
from m3.errors import InvalidArgument, M3Error
from m3.protocols.base import Message
from m3.protocols.messages import admin
from m3.protocols.messages import conversations as cv
from m3.protocols.messages import coordination as co
from m3.protocols.messages import entities as ent
from m3.protocols.messages import governance as gov
from m3.protocols.messages import loop as lp
from m3.protocols.messages import memory as mem
from m3.protocols.messages import rollup as ru
from m3.protocols.messages import sync as sy
from m3.protocols.messages.archive import ArchiveMemories
from m3.protocols.messages.conflicts import RecordContradictions, ResolveConflict
from m3.protocols.messages.files import IndexFiles
from m3.protocols.messages.observations import RecordObservations
from m3.protocols.tools.conflicts import ConflictRecord
from m3.protocols.tools.governance import GdprForgetResult
from m3.protocols.tools.memory import MemoryWriteResult
from m3.retrieval.supersession import Candidates, SupersessionPolicy, candidates_for, supersede_similar
from m3.store import (
    agent_writes,
    archive_writes,
    chat_vectors,
    chat_writes,
    conflict_writes,
    conversation_writes,
    embedding_models,
    grant_writes,
    inbox_writes,
    loop_state,
    maintenance,
    observation_writes,
    rollup_writes,
    sync_capture,
    sync_state,
    sync_writes,
)
from m3.store import entity_writes as entities
from m3.store import memories as rows
from m3.store.audit_writes import prune as prune_audit
from m3.store.audit_writes import record as record_audit
from m3.store.clock import Clock
from m3.store.dialect import dialect_for
from m3.store.dump_writes import load as load_export
from m3.store.engine import StoreOptions, write_errors
from m3.store.filters import isolation_clause
from m3.store.memory_writes import MemoryWrites
from m3.store.subject_writes import forget as forget_subject
from m3.store.subjects import SCRUBBED_TABLES
from m3.store.task_writes import TaskWrites

log = logging.getLogger(__name__)


@dataclass
class Effects:
    """What a transaction changed, told to other actors after it commits."""

    #: (memory id, text) of memories to embed.
    embed: list[tuple[str, str]] = field(default_factory=list)
    #: Memories hard-deleted (the Searcher forgets their vectors).
    erased: list[str] = field(default_factory=list)
    #: Agents that got a notification (their routers wake waiting callers).
    notified: list[str] = field(default_factory=list)
    #: When leases set by the transaction end (the TaskManager's clock sweeps then).
    leases: list[datetime] = field(default_factory=list)
    #: Chat rows appended (the Embedder gives them vectors).
    chat: list[str] = field(default_factory=list)
    #: Memories archived (the Searcher's vector index leaves them out of default searches).
    archived: list[str] = field(default_factory=list)
    #: Archived memories restored (the Searcher's vector index counts them again).
    restored: list[str] = field(default_factory=list)
    #: (memory id, text) of memories to embed without similarity supersession (arrived by warehouse sync).
    embed_quietly: list[tuple[str, str]] = field(default_factory=list)

    def extend(self, other: Effects) -> None:
        for name in ("embed", "erased", "notified", "leases", "chat", "archived", "restored", "embed_quietly"):
            getattr(self, name).extend(getattr(other, name))


@dataclass
class Outcome:
    """One request's reply and its effects."""

    value: Any = None
    effects: Effects = field(default_factory=Effects)


class Writer(ConnectionOwner):
    role = "writer"

    def __init__(self, options: StoreOptions, *, max_batch: int, policy: SupersessionPolicy,
                 searcher: ActorHandle | None, embedder: ActorHandle | None,
                 on_notified: Callable[[tuple[str, ...]], None] | None = None,
                 on_leased: Callable[[datetime], None] | None = None, vector_delay_s: float | None = None,
                 **base: Any):
        super().__init__(options, **base)
        self._max_batch = max(1, max_batch)
        self._vector_delay_s = VECTOR_DELAY_S if vector_delay_s is None else vector_delay_s
        self._policy = policy
        self._searcher = searcher
        self._embedder = embedder
        self._on_notified = on_notified
        self._on_leased = on_leased
        self._pending: list[Envelope] = []
        #: Vectors nobody waits for, committed after the acknowledged requests (see the module docstring).
        self._deferred: list[Envelope] = []
        self._deferred_vectors = 0
        self._vector_timer = EarliestTimer()
        self._clock = Clock()
        self._dialect = dialect_for(options.url)
        self._candidates = candidates_for(self._dialect, policy.exempt_types)

    def handlers(self) -> dict[type[Message], Callable[[Any], Any]]:
        # OptimiseStore runs with no transaction open (VACUUM cannot run in one); receive() committed what waited.
        return {mem.ActivateModel: self._activate_model, mem.MarkModelBuilding: self._mark_building,
                gov.ForgetSubject: self._forget, admin.VerifyFulltext: self._verify_fulltext,
                admin.OptimiseStore: lambda msg: self._dialect.optimise(
                    self.conn, vacuum=msg.vacuum, rebuild_fulltext=msg.rebuild_fulltext)}

    def _forget(self, msg: gov.ForgetSubject) -> GdprForgetResult:
        """Erase a subject in its own transaction (what was queued before it commits first), then scrub the
        files while no transaction is open, then tell the Searcher which memories are gone."""
        now = self._clock()
        for attempt in range(1, TRANSACTION_ATTEMPTS + 1):
            try:
                with self.conn.begin():
                    digest, counts, erased = forget_subject(self.conn, msg.subject, now=now, actor=msg.actor,
                                                            dialect=self._dialect)
                break
            except OperationalError as exc:
                # PostgreSQL aborts one side of a deadlock (the vector Writer's connection inserting beside the
                # rows this erases): the erasure rolled back whole, so running it again is safe.
                if attempt == TRANSACTION_ATTEMPTS or not self._dialect.retryable(exc):
                    raise
                log.info("erasure lost a race (%s); running it again", type(exc.orig).__name__)
        for memory_id in erased:
            self._candidates.discard(memory_id)
        self._publish(Effects(erased=erased))
        self._dialect.scrub(self.conn, list(SCRUBBED_TABLES))
        return GdprForgetResult(subject_hash=digest, erased_at=now, counts=counts)

    def _verify_fulltext(self, msg: admin.VerifyFulltext) -> list[dict[str, Any]]:
        """In a write transaction: SQLite's FTS5 check takes the write lock, which only ``BEGIN IMMEDIATE``
        waits for; a reader's transaction would fail on it whenever another connection wrote meanwhile."""
        with self.conn.begin():
            return maintenance.verify_fulltext(self.conn)

    def _activate_model(self, msg: mem.ActivateModel) -> bool:
        self._candidates.reset()
        with self.conn.begin():
            done = embedding_models.activate(self.conn, msg.model, msg.dim, self._clock(),
                                             require_complete=msg.require_complete)
        if done:
            log.info("search now uses the vectors of %s", msg.model)
        return done

    def _mark_building(self, msg: mem.MarkModelBuilding) -> None:
        self._candidates.reset()
        with self.conn.begin():
            embedding_models.mark_building(self.conn, msg.model, msg.dim, self._clock())

    # -- group commit --------------------------------------------------------------------------

    def receive(self, env: Envelope) -> None:
        if isinstance(env.message, mem.WriteMemory):
            env = _as_batch_of_one(env.message, env.reply)
        if isinstance(env.message, mem.StoreVectors) and env.reply is None:
            self._defer(env)
            return
        if type(env.message) in OPERATIONS:
            if isinstance(env.message, mem.StoreVectors):
                self._pending += self._take_deferred()  # a caller waits for these vectors: keep their order
            self._pending.append(env)
            if self.inbox_empty() or len(self._pending) >= self._max_batch:
                self._flush(vectors=False)
            return
        self._flush()  # anything else (Flush, a model change, a subject's erasure) sees every write committed
        super().receive(env)

    def on_stop(self) -> None:
        self._flush()
        super().on_stop()

    def _defer(self, env: Envelope) -> None:
        """Hold vectors the Embedder sent; they commit when ``vector_delay_s`` has passed since the first
        of them, once ``writer.max_batch`` of them wait, or at the next Flush, whichever comes first."""
        self._deferred.append(env)
        self._deferred_vectors += len(env.message.ids)  # type: ignore[attr-defined]  # a StoreVectors
        if self._deferred_vectors >= self._max_batch:
            self._flush()
        else:
            due = time.monotonic() + self._vector_delay_s
            self._vector_timer.arm(due, self._vector_delay_s, lambda: self.tell_self(mem.Flush()))

    def _take_deferred(self) -> list[Envelope]:
        deferred, self._deferred, self._deferred_vectors = self._deferred, [], 0
        self._vector_timer.cancel()
        return deferred

    def _flush(self, *, vectors: bool = True) -> None:
        """Commit the pending requests and answer them; then, with ``vectors``, the deferred vectors in a
        transaction of their own."""
        batch, self._pending = self._pending, []
        self._commit(batch)
        if vectors:
            self._commit(self._take_deferred())

    def _commit(self, batch: list[Envelope]) -> None:
        # begun: each request of a group commit waited for the whole transaction (its handling time).
        begun = time.perf_counter()
        if not batch:
            return
        try:
            outcomes, effects = self._run_retrying(batch)
        except Exception as exc:
            if len(batch) == 1 or isinstance(exc, OperationalError):
                # The database refused the transaction itself (locked past the busy timeout, read-only,
                # disk full): every request would fail alike, so none is retried on its own.
                self._answer_all(batch, write_errors(len(batch), exc, self._dialect), begun)
                return
            log.warning("group commit of %d failed (%r); retrying one by one", len(batch), exc)
            for env in batch:
                self._commit([env])
            return
        self._publish(effects)
        self._answer_all(batch, outcomes, begun)

    def _run_retrying(self, batch: list[Envelope]) -> tuple[list[Any], Effects]:
        """Run the batch; on PostgreSQL run it again when it lost a deadlock or serialization race."""
        for attempt in range(1, TRANSACTION_ATTEMPTS + 1):
            try:
                return self._run(batch)
            except Exception as exc:
                self._candidates.reset()  # what it learnt in the rolled-back transaction may not hold
                if not isinstance(exc, OperationalError) or attempt == TRANSACTION_ATTEMPTS \
                        or not self._dialect.retryable(exc):
                    raise
                log.info("write transaction lost a race (%s); running it again", type(exc.orig).__name__)
        raise AssertionError("unreachable")

    def _run(self, batch: list[Envelope]) -> tuple[list[Any], Effects]:
        conn = self.conn
        if len(batch) == 1:
            return self._run_one(conn, batch[0])
        outcomes: list[Any] = [None] * len(batch)
        effects = Effects()
        with conn.begin():
            # Before anything is written: the candidates see committed data only, and on PostgreSQL
            # the transaction takes its advisory locks before any row lock.
            self._candidates.prepare(conn, _flat([env.message for env in batch]))
            for unit in work_units(batch):
                msgs = [batch[i].message for i in unit]
                if OPERATIONS[type(msgs[0])].refusable:
                    try:
                        with conn.begin_nested():
                            done = self._apply_unit(conn, msgs)
                    except M3Error as exc:
                        outcomes[unit[0]] = exc
                        continue
                else:
                    # Validated before it was sent, not expected to fail: no savepoint. Should it fail anyway,
                    # the transaction rolls back and _flush runs every request of the batch alone.
                    done = self._apply_unit(conn, msgs)
                for i, outcome in zip(unit, done, strict=True):
                    outcomes[i] = outcome.value
                    effects.extend(outcome.effects)
        return outcomes, effects

    def _run_one(self, conn: Connection, env: Envelope) -> tuple[list[Any], Effects]:
        """A batch of one request: no savepoint (two statements saved); a refused request rolls back the
        whole transaction instead, which then holds nothing else."""
        try:
            with conn.begin():
                self._candidates.prepare(conn, _flat([env.message]))
                [outcome] = self._apply_unit(conn, [env.message])
        except M3Error as exc:
            return [exc], Effects()
        return [outcome.value], outcome.effects

    def _publish(self, fx: Effects) -> None:
        if fx.embed and self._embedder is not None:
            ids, texts = zip(*fx.embed, strict=True)
            self._embedder.tell(mem.MemoriesWritten(ids=ids, texts=texts))
        if fx.embed_quietly and self._embedder is not None:
            ids, texts = zip(*fx.embed_quietly, strict=True)
            self._embedder.tell(mem.MemoriesWritten(ids=ids, texts=texts, supersede=False))
        if fx.chat and self._embedder is not None:
            self._embedder.tell(cv.ChatWritten(ids=tuple(fx.chat)))
        if fx.erased and self._searcher is not None:
            self._searcher.tell(mem.MemoriesErased(ids=tuple(fx.erased)))
        if fx.archived and self._searcher is not None:
            self._searcher.tell(mem.MemoriesArchived(ids=tuple(fx.archived)))
        if fx.restored and self._searcher is not None:
            self._searcher.tell(mem.MemoriesRestored(ids=tuple(fx.restored)))
        if fx.notified and self._on_notified is not None:
            self._on_notified(tuple(dict.fromkeys(fx.notified)))
        if fx.leases and self._on_leased is not None:
            self._on_leased(min(fx.leases))

    def _answer_all(self, batch: list[Envelope], outcomes: list[Any], begun: float) -> None:
        for env, outcome in zip(batch, outcomes, strict=True):
            self.stats.took(time.perf_counter() - begun)
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

    def _apply_unit(self, conn: Connection, msgs: list[Message]) -> list[Outcome]:
        """Apply requests that run together (see :func:`work_units`); one outcome per request."""
        tx, op = Tx(conn, self._clock, self._policy, self._candidates), OPERATIONS[type(msgs[0])]
        if len(msgs) == 1:
            return [op.run(tx, msgs[0])]
        assert op.run_all is not None
        return op.run_all(tx, msgs)


# -- the write operations: message type -> how it runs in the transaction and what it reports ------


@dataclass(frozen=True)
class Tx:
    """What an operation runs on: the transaction's connection and the Writer's clock and supersession state."""

    conn: Connection
    clock: Clock
    policy: SupersessionPolicy
    candidates: Candidates

    @property
    def memories(self) -> MemoryWrites:
        return MemoryWrites(self.conn, self.clock)


@dataclass(frozen=True)
class Operation:
    """How the Writer applies one kind of request."""

    run: Callable[[Tx, Any], Outcome]
    #: May be refused (M3Error) after writing part of it: in a group it runs in its own savepoint.
    refusable: bool = False
    #: Whether two consecutive requests of this kind run as one unit, through ``run_all``.
    mergeable: Callable[[Any, Any], bool] | None = None
    run_all: Callable[[Tx, list[Any]], list[Outcome]] | None = None


def _written(done: tuple[list[Any], list[tuple[str, str]]]) -> Outcome:
    outcomes, fresh = done
    return Outcome(outcomes, Effects(embed=fresh))


def _write_all(tx: Tx, msgs: list[mem.WriteMemories]) -> list[Outcome]:
    """New memories; an archived duplicate written again is restored (the Searcher is told with the first)."""
    ops = tx.memories
    outcomes = [_written(done) for done in ops.write_all(msgs)]
    outcomes[0].effects.restored.extend(ops.restored)
    return outcomes


def _change(change: Callable[[MemoryWrites, Any], Any]) -> Operation:
    """A change the Writer may refuse part-way (``MemoryWrites``): it reports what it embedded and erased,
    and the memories it retired stop being supersession candidates at once."""

    def run(tx: Tx, msg: Message) -> Outcome:
        ops = tx.memories
        result = change(ops, msg)
        for memory_id in ops.retired:
            tx.candidates.discard(memory_id)
        return Outcome(result, Effects(embed=ops.fresh, erased=ops.erased, restored=ops.restored))

    return Operation(run, refusable=True)


def _archive(tx: Tx, msg: ArchiveMemories) -> Outcome:
    """The decay pass's archiving and watermark (:mod:`m3.store.archive_writes`); archived memories stop being
    supersession candidates at once."""
    result = archive_writes.archive(tx.conn, msg, tx.clock())
    for memory_id in result.archived:
        tx.candidates.discard(memory_id)
    return Outcome(result, Effects(archived=list(result.archived)))


def _vectors(tx: Tx, msgs: list[mem.StoreVectors]) -> list[Outcome]:
    done = supersede_similar(tx.conn, mem.StoreVectors.merged(msgs) if len(msgs) > 1 else msgs[0], tx.policy,
                             tx.clock, tx.candidates)
    # The authors of memories it retired are told (notifications committed in this transaction).
    return [Outcome(effects=Effects(notified=done))] + [Outcome() for _ in msgs[1:]]


def _chat_written(result: Any) -> Outcome:
    """A chat append's reply (of one row or of several); the rows it appended are to be embedded."""
    return Outcome(result, Effects(chat=[i.id for i in getattr(result, "items", None) or [result]]))


def _promote(tx: Tx, msg: cv.PromoteTurns) -> Outcome:
    result, fresh = conversation_writes.promote(tx.conn, msg, tx.clock)
    return Outcome(result, Effects(embed=fresh))


def _observations(tx: Tx, msg: RecordObservations) -> Outcome:
    result, fresh = observation_writes.record(tx.conn, msg, tx.clock)
    return Outcome(result, Effects(embed=fresh))


def _resolve_conflict(tx: Tx, msg: ResolveConflict) -> Outcome:
    ops = tx.memories
    done = conflict_writes.resolve_conflict(tx.conn, msg.id, msg.resolution, actor=msg.actor, clock=tx.clock,
                                            flt=msg.filter, content=msg.content, title=msg.title, ops=ops)
    for memory_id in ops.retired:
        tx.candidates.discard(memory_id)
    return Outcome(ConflictRecord(**done), Effects(embed=ops.fresh))


def _touch(tx: Tx, msg: mem.TouchMemories) -> Outcome:
    rows.touch(tx.conn, msg.ids, msg.at)
    return Outcome()


def _commit_pass(tx: Tx, msg: lp.CommitPass) -> Outcome:
    """A pass step's writes in order, as one unit: one refused, none of them stays (the caller's savepoint)."""
    for write in msg.writes:
        if type(write) not in OPERATIONS or isinstance(write, lp.CommitPass):
            raise InvalidArgument(f"pass {msg.name}: the Writer does not commit {type(write).__name__} in a pass step",
                                  hint="Return Writer requests such as WriteMemories or MoveWatermark.")
    values, effects = [], Effects()
    for write in msg.writes:
        done = OPERATIONS[type(write)].run(tx, write)
        values.append(done.value)
        effects.extend(done.effects)
    return Outcome(values, effects)


def _set_paused(conn: Connection, msg: lp.SetPassesPaused, now: datetime) -> None:
    for name in msg.names:
        loop_state.set_paused(conn, name, msg.paused, now)


def _flat(msgs: list[Message]) -> list[Message]:
    """The requests of a batch with those inside each CommitPass in its place (what the transaction prepares for)."""
    return [inner for m in msgs for inner in (m.writes if isinstance(m, lp.CommitPass) else (m,))]
def _rollup(tx: Tx, msg: ru.CommitRollup) -> Outcome:
    """A roll-up tick's beliefs and watermark; the beliefs it superseded stop being candidates."""
    result, fresh, retired = rollup_writes.commit(tx.conn, msg, tx.clock)
    for memory_id in retired:
        tx.candidates.discard(memory_id)
    return Outcome(result, Effects(embed=fresh))


def _unconsolidate(tx: Tx, msg: ru.UnconsolidateMemory) -> Outcome:
    result, retired = rollup_writes.unconsolidate(tx.conn, msg, tx.clock)
    for memory_id in retired:
        tx.candidates.discard(memory_id)
    return Outcome(result)


def _at_now(change: Callable[[Connection, Any, datetime], Any], *, notifies: bool = False,
            refusable: bool = False) -> Operation:
    """The operation ``change(conn, msg, now)``; with ``notifies``, it notifies ``msg.to_agent``."""
    return Operation(lambda tx, msg: Outcome(change(tx.conn, msg, tx.clock()),
                                             Effects(notified=[msg.to_agent] if notifies else [])),
                     refusable=refusable)


def _task(change: Callable[[TaskWrites, Any], Any]) -> Operation:
    """A task change by the rules of ``TaskWrites``; reports the agents it notified and the leases it set."""

    def run(tx: Tx, msg: mem.Change) -> Outcome:
        ops = TaskWrites(tx.conn, tx.clock(), isolation_clause(msg.filter))
        return Outcome(change(ops, msg), Effects(notified=ops.notified, leases=ops.leases))

    return Operation(run)


OPERATIONS: dict[type[Message], Operation] = {
    mem.WriteMemories: Operation(lambda tx, msg: _write_all(tx, [msg])[0], mergeable=lambda a, b: True,
                                 run_all=_write_all),
    mem.SupersedeMemory: _change(MemoryWrites.supersede), mem.UpdateMemory: _change(MemoryWrites.update),
    mem.DeleteMemory: _change(MemoryWrites.delete), mem.RestoreMemory: _change(MemoryWrites.restore),
    mem.PinMemory: _change(MemoryWrites.pin), mem.UnpinMemory: _change(MemoryWrites.pin),
    mem.LinkMemories: _change(MemoryWrites.link), mem.UnlinkMemories: _change(MemoryWrites.unlink),
    IndexFiles: _change(MemoryWrites.index_files),
    mem.StoreVectors: Operation(lambda tx, msg: _vectors(tx, [msg])[0], run_all=_vectors,
                            mergeable=lambda a, b: (a.model, a.dim, a.supersede) == (b.model, b.dim, b.supersede)),
    mem.TouchMemories: Operation(_touch),
    ArchiveMemories: Operation(_archive),
    gov.RecordAudit: Operation(lambda tx, msg: Outcome(record_audit(tx.conn, msg.reads))),
    gov.PruneAudit: Operation(lambda tx, msg: Outcome(prune_audit(tx.conn, msg.before))),
    mem.WriteChat: Operation(lambda tx, msg: _chat_written(chat_writes.append(tx.conn, msg, tx.clock()))),
    mem.WriteChats: Operation(lambda tx, msg: _chat_written(chat_writes.append_all(tx.conn, msg, tx.clock()))),
    cv.StoreChatVectors: Operation(lambda tx, msg: Outcome(chat_vectors.store_sent(tx.conn, msg, tx.clock()))),
    cv.DeleteConversation: _at_now(conversation_writes.delete_conversation, refusable=True),
    cv.RedactConversation: _at_now(conversation_writes.redact_conversation, refusable=True),
    cv.RecordConversationEvent: _at_now(conversation_writes.record_event),
    cv.PromoteTurns: Operation(_promote, refusable=True),
    mem.RedactChat: _at_now(chat_writes.redact, refusable=True),
    mem.ShareMemory: _at_now(grant_writes.apply, refusable=True),
    mem.UnshareMemory: _at_now(grant_writes.apply, refusable=True),
    co.RegisterAgent: _at_now(agent_writes.register), co.AgentHeartbeat: _at_now(agent_writes.heartbeat),
    co.AgentOffline: _at_now(agent_writes.offline), co.CreateToken: _at_now(agent_writes.create_token),
    co.RevokeTokens: _at_now(agent_writes.revoke_tokens),
    co.SendHandoff: _at_now(inbox_writes.send_handoff, notifies=True),
    co.SendNotification: _at_now(inbox_writes.send_notification, notifies=True),
    co.AckInbox: _at_now(inbox_writes.ack_inbox), co.AckNotifications: _at_now(inbox_writes.ack_notifications),
    co.CreateTask: _task(TaskWrites.create), co.AssignTask: _task(TaskWrites.assign),
    co.UpdateTask: _task(TaskWrites.update), co.SetTaskResult: _task(TaskWrites.set_result),
    co.DeleteTask: _task(TaskWrites.delete), co.ClaimTask: _task(TaskWrites.claim),
    co.RenewLease: _task(TaskWrites.renew), co.ReleaseTask: _task(TaskWrites.release),
    co.ExpireLeases: _task(TaskWrites.expire),
    ResolveConflict: Operation(_resolve_conflict, refusable=True),
    RecordObservations: Operation(_observations),  # the Observer's tick: observations and watermark at once
    RecordContradictions: _at_now(conflict_writes.record_contradictions),
    ru.CommitRollup: Operation(_rollup, refusable=True),
    ru.UnconsolidateMemory: Operation(_unconsolidate, refusable=True),
    ent.IndexEntities: _at_now(entities.index), ent.MergeEntities: _at_now(entities.merge_request, refusable=True),
    ent.UnmergeEntities: _at_now(entities.unmerge_request, refusable=True),
    lp.CommitPass: Operation(_commit_pass, refusable=True),
    lp.MoveWatermark: _at_now(lambda conn, msg, now: loop_state.set_watermark(conn, msg.name, msg.watermark, now)),
    lp.SetPassesPaused: _at_now(_set_paused),
    admin.ImportStore: Operation(lambda tx, msg: Outcome(load_export(tx.conn, msg.tables, merge=msg.merge)),
                                 refusable=True),  # one transaction: refused or failed, nothing of it remains
}


def _enable_sync(conn: Connection, msg: sy.EnableSync, _now: datetime) -> dict[str, Any]:
    node = sync_state.node_id(conn)
    return {"node": node, "noted": sync_capture.enable(conn, msg.now_ms)}


def _apply_pulled(tx: Tx, msg: sy.ApplyPulled) -> Outcome:
    """A pulled batch (:func:`m3.store.sync_writes.apply`): the Searcher hears of memories erased, archived or
    restored; the memories it wrote stop being supersession candidates until they are read again."""
    done = sync_writes.apply(tx.conn, msg.versions, watermark=msg.watermark, now_ms=msg.now_ms)
    for memory_id in done.memories + done.erased:
        tx.candidates.discard(memory_id)
    value = {"applied": done.applied, "pending": done.pending, "echoes": done.echoes, "orphaned": done.orphaned,
             "memories": done.memories}
    return Outcome(value, Effects(erased=done.erased, archived=done.archived, restored=done.restored,
                                  notified=done.notified))


SYNC_OPERATIONS: dict[type[Message], Operation] = {
    sy.EnableSync: _at_now(_enable_sync),
    sy.MeetWarehouse: Operation(lambda tx, msg: Outcome(sync_capture.start_over(tx.conn, msg.warehouse, msg.now_ms))),
    sy.StageChanges: Operation(lambda tx, msg: Outcome(sync_writes.stage(tx.conn, tables=msg.tables))),
    sy.ConfirmPush: Operation(lambda tx, msg: Outcome(sync_writes.confirm(tx.conn, msg.node, msg.upto, msg.ahead))),
    sy.ApplyPulled: Operation(_apply_pulled, refusable=True),
    sy.SettlePulled: Operation(lambda tx, msg: Outcome(None, Effects(
        embed_quietly=sync_writes.unembedded(tx.conn, msg.ids)))),
    sy.RecordConflicts: Operation(lambda tx, msg: Outcome(sync_writes.record_conflicts(tx.conn, msg.entries))),
    sy.RecordRun: Operation(lambda tx, msg: Outcome(sync_writes.record_run(tx.conn, msg.run))),
}
OPERATIONS.update(SYNC_OPERATIONS)


class _FirstOutcome:
    """The reply of a :class:`mem.WriteMemory` run as a :class:`mem.WriteMemories` of one: its one outcome, as
    memory_write's result (a fresh memory's vector is on its way)."""

    def __init__(self, reply: Reply):
        self.set_exception = reply.set_exception
        self.set_result: Callable[[list[mem.WriteOutcome]], None] = lambda outcomes: reply.set_result(
            MemoryWriteResult(**dict(outcomes[0]), embedding="pending" if outcomes[0].created else "ready"))


def _as_batch_of_one(msg: mem.WriteMemory, reply: Reply | None) -> Envelope:
    # Its fields were validated when it was built, as NewMemory's own (WriteMemory is a NewMemory): they are
    # copied, not dumped and validated a second time on the Writer's thread.
    memory = mem.NewMemory.model_construct(**{name: getattr(msg, name) for name in _NEW_MEMORY_FIELDS})
    return Envelope(mem.WriteMemories.model_construct(memories=(memory,), actor=msg.actor),
                    _FirstOutcome(reply) if reply is not None else None)


_NEW_MEMORY_FIELDS = tuple(mem.NewMemory.model_fields)


def work_units(batch: list[Envelope]) -> list[list[int]]:
    """Positions in ``batch`` grouped into units applied at once: a run of consecutive mem.WriteMemories, or of
    consecutive mem.StoreVectors of one model and supersede flag (``Operation.mergeable``); any other request
    alone. Order is kept."""
    units: list[list[int]] = []
    for i, env in enumerate(batch):
        if units and _mergeable(batch[units[-1][-1]].message, env.message):
            units[-1].append(i)
        else:
            units.append([i])
    return units


def _mergeable(a: Message, b: Message) -> bool:
    op = OPERATIONS[type(a)]
    return type(a) is type(b) and op.mergeable is not None and op.mergeable(a, b)


#: Longest a vector the Embedder sent waits for others to commit with (the Writer's timer; a Flush commits it
#: at once). Vectors are deferred work: batching them costs nothing anyone waits for.
VECTOR_DELAY_S = 0.02

#: How often a transaction that lost a deadlock or serialization race (PostgreSQL) is run.
TRANSACTION_ATTEMPTS = 4

