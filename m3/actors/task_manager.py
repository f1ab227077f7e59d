"""The task-tree manager: reads of task trees, and the lease clock.

Task changes are Writer requests, sent there directly: their rules are SQL in the Writer's transaction
(docs/coordination.md, "Actors"). A lapsed lease reads as pending everywhere already; the clock only
makes the store say so: one timer, armed for the earliest lease end it knows of (from the store at
start, from the Writer's commits through :func:`lease_clock`, from each sweep's answer), asks the
Writer to sweep.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from m3.actors.base import EarliestTimer
from m3.actors.reader import StoreReader
from m3.actors.supervisor import ActorHandle
from m3.protocols.base import Message
from m3.protocols.messages.coordination import ExpireLeases, GetTask, GetTaskTree, ListTasks
from m3.protocols.tools.tasks import TaskDetails, TaskListResult, TaskNode, TaskRecord, TaskTreeResult
from m3.store import tasks as task_rows
from m3.store.engine import StoreOptions
from m3.store.filters import isolation_clause

log = logging.getLogger(__name__)

#: Fire a little after the lease ends, so that the sweep's clock is past it.
SWEEP_MARGIN_S = 0.005
RETRY_SWEEP_S = 5.0


class LeaseScheduled(Message):
    """A lease may expire at ``at``: sweep then (from the Writer's commits and from the sweep's answer)."""

    at: datetime | None


class SweepLeases(Message):
    """The manager's timer fired."""


def lease_clock(tasks: ActorHandle) -> Callable[[datetime], None]:
    """What the Writer calls after a commit that set a lease ending at ``at``: the manager's timer covers it."""
    return lambda at: tasks.tell(LeaseScheduled(at=at))


class _SweepReply:
    """The Writer's answer to a sweep (the next lease end), told to the manager as a :class:`LeaseScheduled`."""

    def __init__(self, tell: Callable[[Message], None]):
        self._tell = tell

    def set_result(self, value: datetime | None) -> None:
        self._tell(LeaseScheduled(at=value))

    def set_exception(self, exc: BaseException) -> None:
        log.warning("lease sweep failed (%r); trying again in %.0f s", exc, RETRY_SWEEP_S)
        self.set_result(datetime.now(UTC) + timedelta(seconds=RETRY_SWEEP_S))


class TaskManager(StoreReader):
    def __init__(self, options: StoreOptions, *, writer: ActorHandle, **base: Any):
        super().__init__(options, **base)
        self._writer = writer
        self._timer = EarliestTimer()

    def setup(self) -> None:
        super().setup()
        with self.conn.begin():
            first = task_rows.next_expiry(self.conn, datetime.now(UTC))
        self._arm(first)

    def release(self) -> None:
        self._timer.cancel()
        super().release()

    def handlers(self) -> dict[type[Message], Callable[[Any], Any]]:
        return {GetTask: self.get, ListTasks: self.list, GetTaskTree: self.tree, SweepLeases: self._sweep,
                LeaseScheduled: lambda msg: self._arm(msg.at)}

    # -- the lease clock -----------------------------------------------------------------------

    def _sweep(self, _msg: SweepLeases) -> None:
        self._timer.cancel()
        self._writer.tell(ExpireLeases(), _SweepReply(self.tell_self))

    def _arm(self, at: datetime | None) -> None:
        """Make sure a sweep runs soon after ``at`` (keeps an earlier timer)."""
        if at is not None:
            delay = max(0.0, (at - datetime.now(UTC)).total_seconds()) + SWEEP_MARGIN_S
            self._timer.arm(at, delay, lambda: self.tell_self(SweepLeases()))

    # -- reads ---------------------------------------------------------------------------------

    def get(self, msg: GetTask) -> TaskDetails:
        visible = isolation_clause(msg.filter)
        task = task_rows.get(self.conn, msg.id, datetime.now(UTC), visible)
        if msg.history:
            task["history"] = task_rows.history(self.conn, task["id"], visible)
        return TaskDetails(**task)

    def list(self, msg: ListTasks) -> TaskListResult:
        found = task_rows.list_tasks(self.conn, msg, msg.limit, datetime.now(UTC), isolation_clause(msg.filter))
        return TaskListResult(count=len(found), items=[TaskRecord(**task) for task in found])

    def tree(self, msg: GetTaskTree) -> TaskTreeResult:
        found = task_rows.tree(self.conn, msg.id, msg.depth, msg.include_deleted, datetime.now(UTC),
                               isolation_clause(msg.filter))
        return TaskTreeResult(tree=TaskNode.model_validate(found), depth=msg.depth)
