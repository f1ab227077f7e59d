"""The rules of shared task trees, as conditional writes inside the Writer's transaction (docs/coordination.md).

Every change is ``UPDATE … WHERE id = :id AND version = :read AND state = :read_state`` and checks the row
count: a caller that read an older version gets ``conflict``, never a silent overwrite, on both dialects (on
PostgreSQL a concurrent UPDATE waits for the row lock, then re-checks the WHERE against the committed row).
Every change records a ``task_events`` row with its actor.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, Connection, RowMapping, bindparam, delete, insert, not_, select, update
from sqlalchemy.sql.elements import True_

from m3.errors import Conflict, IllegalTransition, InvalidArgument, LeaseHeld, LeaseLost
from m3.protocols.messages.coordination import (
    AssignTask,
    ClaimTask,
    CreateTask,
    DeleteTask,
    ExpireLeases,
    ReleaseTask,
    RenewLease,
    SetTaskResult,
    UpdateTask,
)
from m3.protocols.tools.tasks import TaskClaimResult, TaskDeleteResult, TaskRecord
from m3.store import agents, inbox_writes, memories
from m3.store import tasks as rows
from m3.store.schema import memories as m
from m3.store.schema import task_events as ev
from m3.store.schema import tasks as t

EDITABLE = ("title", "description", "priority", "kind", "metadata")
COMPLETION = frozenset({"completed", "failed", "cancelled"})
#: Candidates a claim tries per round before looking again (others may take some meanwhile on PostgreSQL).
CLAIM_BATCH = 8
CLAIM_ROUNDS = 4
#: Most leases one sweep ends; the rest follow in the next transaction (keeps one commit small).
SWEEP_BATCH = 500
#: Who lease expiry is attributed to in history.
SYSTEM_ACTOR = "m3"
# Built once: a statement object memoises its cache key, which the Writer's hot path would rebuild per call.
_BY_ID = select(t).where(t.c.id == bindparam("task_id"))
_ADD_EVENT = insert(ev)
_RESULT_SHOWN = select(m.c.id).where(m.c.id == bindparam("memory_id"))
_LAST_EVENT = select(ev.c.event).where(ev.c.task_id == bindparam("task_id")).order_by(ev.c.seq.desc()).limit(1)


class TaskWrites:
    """Task changes on one connection at the Writer's clock; each returns the caller's result, and collects the
    agents it notified and the ends of the leases it set."""

    def __init__(self, conn: Connection, now: datetime, visible: ColumnElement[bool]):
        self.conn = conn
        self.now = now
        self.visible = visible
        self.notified: list[str] = []
        self.leases: list[datetime] = []

    # -- helpers -------------------------------------------------------------------------------

    def event(self, task_id: str, name: str, actor: str | None, **details: Any) -> None:
        self.conn.execute(_ADD_EVENT, {"task_id": task_id, "event": name, "actor": actor, "at": self.now,
                                       "details": _jsonable(details)})

    def notify(self, task: RowMapping | dict[str, Any], kind: str, message: str, actor: str | None,
               *recipients: str | None) -> None:
        for agent in dict.fromkeys(r for r in recipients if r is not None and r != actor):
            inbox_writes.notify(self.conn, to_agent=agent, kind=kind, message=message, now=self.now, from_agent=actor,
                         ref_id=task["id"], data={"task_id": task["id"], "state": task["state"]})
            self.notified.append(agent)

    def load(self, ref: str) -> RowMapping:
        row = self.conn.execute(_BY_ID, {"task_id": rows.resolve(self.conn, ref)}).mappings().first()
        if row is None:
            raise rows.not_found(ref)
        return row

    def current(self, ref: str) -> RowMapping:
        """The task row with a lapsed lease already turned back to pending (recorded as ``lease_expired``)."""
        row = self.load(ref)
        if rows.lapsed(row, self.now):
            back = self.conn.execute(update(t).where(t.c.id == row["id"], rows.lapsed_clause(self.now))
                                     .values(state="pending", owner=None, lease_expires_at=None)
                                     .returning(*t.c)).mappings().first()
            assert back is not None
            self.expired(row)
            row = back
        return row

    def expired(self, row: RowMapping) -> None:
        """Record that ``row``'s lease ran out, and tell its creator and the agent that held it."""
        self.event(row["id"], "lease_expired", SYSTEM_ACTOR, owner=row["owner"],
                   lease_expires_at=row["lease_expires_at"])
        message = f"lease of {row['owner']} ran out; task pending again: {row['title'][:200]}"
        self.notify({"id": row["id"], "state": "pending"}, "lease_expired", message, SYSTEM_ACTOR,
                    row["creator"], row["owner"])

    def at_version(self, ref: str, version: int) -> RowMapping:
        """The current row, refusing a stale version."""
        row = self.current(ref)
        if row["version"] != version:
            raise Conflict(f"task {row['id']} is at version {row['version']}, not {version}",
                           details={"current_version": row["version"], "state": row["state"]})
        return row

    def checked(self, ref: str, version: int) -> RowMapping:
        """The current row, refusing a stale version or a deleted task."""
        row = self.at_version(ref, version)
        if row["deleted_at"] is not None:
            raise InvalidArgument(f"task {row['id']} is deleted", hint="task_list with include_deleted shows it.")
        return row

    def unleased(self, row: RowMapping, actor: str | None) -> RowMapping:
        """``row``, refused with ``lease_held`` while another agent holds it under a valid lease."""
        if rows.held_by_other(row, actor, self.now):
            raise LeaseHeld(f"task {row['id']} is held by {row['owner']!r} under a lease until "
                            f"{row['lease_expires_at'].isoformat()}",
                            details={"owner": row["owner"], "lease_expires_at": row["lease_expires_at"].isoformat(),
                                     "state": row["state"]})
        return row

    def change(self, row: RowMapping, holder: str | None = None, *, guarded: bool = False,
               **values: Any) -> dict[str, Any]:
        """Apply ``values`` if the row is still as read (and, ``guarded``, not under a lease of another agent
        than ``holder``); bump the version; return the new record."""
        where = [t.c.id == row["id"], t.c.version == row["version"], t.c.state == row["state"]]
        if guarded:
            where.append(not_(rows.held_by_other_clause(holder, self.now)))
        new = self.conn.execute(
            update(t).where(*where)
            .values(version=t.c.version + 1, updated_at=self.now, **values).returning(*t.c)).mappings().first()
        if new is None:
            raise Conflict(f"task {row['id']} changed while this change was applied",
                           hint="Read it again (task_get) and retry.")
        return self.present(new)

    def record(self, task_id: str) -> dict[str, Any]:
        return self.present(self.load(task_id))

    def present(self, row: RowMapping) -> dict[str, Any]:
        """The caller's view of ``row``: the result memory only if the reader may see it."""
        out = rows.record(row, self.now)
        shown = out["result_memory_id"]
        if shown is not None and not isinstance(self.visible, True_):
            found = self.conn.execute(_RESULT_SHOWN.where(self.visible), {"memory_id": shown}).first()
            out["result_memory_id"] = None if found is None else shown
        return out

    # -- changes -------------------------------------------------------------------------------

    def create(self, msg: CreateTask) -> TaskRecord:
        parent = None if msg.parent_id is None else self.current(msg.parent_id)
        if parent is not None and parent["deleted_at"] is not None:
            raise InvalidArgument(f"parent task {parent['id']} is deleted")
        parent_id = None if parent is None else parent["id"]
        if msg.assignee is not None:
            agents.require(self.conn, msg.assignee, "assignee")
        task_id = str(uuid.uuid4())
        self.conn.execute(insert(t).values(
            id=task_id, parent_id=parent_id, title=msg.title, description=msg.description, kind=msg.kind,
            priority=msg.priority, state="pending", creator=msg.actor, owner=msg.assignee, lease_expires_at=None,
            result_memory_id=None, result_note=None, metadata=dict(msg.metadata), version=1, created_at=self.now,
            updated_at=self.now, deleted_at=None))
        self.event(task_id, "created", msg.actor, parent_id=parent_id, title=msg.title, assignee=msg.assignee)
        task = self.record(task_id)
        if msg.assignee is not None:
            self.notify(task, "task_assigned", f"task assigned to {msg.assignee}: {msg.title[:200]}", msg.actor,
                        msg.assignee)
        return TaskRecord(**task)

    def assign(self, msg: AssignTask) -> TaskRecord:
        row = self.checked(msg.id, msg.version)
        if row["state"] in rows.TERMINAL:
            raise IllegalTransition(f"task {row['id']} is {row['state']} and cannot be assigned",
                                    details={"state": row["state"]})
        if msg.assignee is not None:
            agents.require(self.conn, msg.assignee, "assignee")
        task = self.change(row, owner=msg.assignee, lease_expires_at=None)
        self.event(row["id"], "assigned", msg.actor, owner=msg.assignee, previous_owner=row["owner"])
        if msg.assignee is not None:
            self.notify(task, "task_assigned", f"task assigned to {msg.assignee}: {row['title'][:200]}", msg.actor,
                        msg.assignee, row["creator"])
        return TaskRecord(**task)

    def update(self, msg: UpdateTask) -> TaskRecord:
        changes = {name: getattr(msg, name) for name in EDITABLE if getattr(msg, name) is not None}
        row = self.unleased(self.checked(msg.id, msg.version), msg.actor)
        target = msg.state if msg.state is not None and msg.state != row["state"] else None
        if target is None and not changes:
            raise InvalidArgument("nothing to update", hint="Give a new state or a field to change.")
        values: dict[str, Any] = dict(changes)
        if target is not None:
            allowed = rows.TRANSITIONS[row["state"]]
            if target not in allowed:
                why = " (its lease ran out, so it is pending again)" if row["state"] == "pending" and self.conn.execute(
                    _LAST_EVENT, {"task_id": row["id"]}).scalar() == "lease_expired" else ""
                raise IllegalTransition(f"task {row['id']} cannot go from {row['state']} to {target}{why}",
                                        details={"from": row["state"], "to": target, "allowed": sorted(allowed)})
            values.update(_side_effects(row, target, msg.actor))
        task = self.change(row, msg.actor, guarded=True, **values)
        previous = {k: row[k] for k in changes}
        self.event(row["id"], "updated", msg.actor, reason=msg.reason, previous=previous,
                   **({"from": row["state"], "to": target} if target else {}))
        if target in COMPLETION:
            self.notify(task, f"task_{target}", f"task {target}: {row['title'][:200]}", msg.actor,
                        task["owner"], row["creator"])
        return TaskRecord(**task)

    def set_result(self, msg: SetTaskResult) -> TaskRecord:
        """Link the result memory (as ``msg.filter`` sees it; with isolation on, one every agent may read)."""
        memory_id = (None if msg.memory_id is None
                     else memories.shareable(self.conn, [msg.memory_id], msg.filter, None)[0])
        row = self.unleased(self.checked(msg.id, msg.version), msg.actor)
        task = self.change(row, msg.actor, guarded=True, result_memory_id=memory_id, result_note=msg.note)
        self.event(row["id"], "result_set", msg.actor, memory_id=memory_id, note=msg.note)
        return TaskRecord(**task)

    def delete(self, msg: DeleteTask) -> TaskDeleteResult:
        row = self.unleased(self.at_version(msg.id, msg.version), msg.actor)
        subtree = self._subtree(row["id"])
        if msg.hard:
            if row["deleted_at"] is None:
                raise InvalidArgument(f"task {row['id']} must be soft-deleted before a hard delete",
                                      hint="Call task_delete without hard first, then again with hard=true.")
            for task_id in reversed(subtree):  # leaves first: parent_id has no cascade
                self.conn.execute(delete(ev).where(ev.c.task_id == task_id))
                self.conn.execute(delete(t).where(t.c.id == task_id))
            return TaskDeleteResult(**rows.record(row, self.now), deleted="hard", affected=len(subtree))
        if row["deleted_at"] is not None:
            raise InvalidArgument(f"task {row['id']} is already deleted",
                                  hint="Repeat with hard=true to erase it for good.")
        for task_id in subtree:
            self.conn.execute(update(t).where(t.c.id == task_id, t.c.deleted_at.is_(None))
                              .values(deleted_at=self.now, updated_at=self.now, lease_expires_at=None,
                                      version=t.c.version + 1))
            self.event(task_id, "deleted", msg.actor, reason=msg.reason, root=row["id"])
        return TaskDeleteResult(**self.record(row["id"]), deleted="soft", affected=len(subtree))

    def _subtree(self, root: str) -> list[str]:
        """The task and every descendant, parents before children."""
        out, frontier = [root], [root]
        while frontier:
            frontier = [r[0] for r in self.conn.execute(select(t.c.id).where(t.c.parent_id.in_(frontier)))]
            out.extend(frontier)
        return out

    # -- claims and leases ---------------------------------------------------------------------

    def claim(self, msg: ClaimTask) -> TaskClaimResult:
        """Take the most urgent claimable task under a lease; ``claimed`` false when there is none."""
        due = self.now + timedelta(seconds=msg.lease)
        claimable = rows.claimable_clause(msg.agent_id, self.now)
        among: dict[str, Any] = {"state": None}
        if msg.among.parent_id is not None:
            among["parent_id"] = rows.existing(self.conn, msg.among.parent_id)
        where = [claimable, *rows.filter_clauses(msg.among.model_copy(update=among), self.now)]
        for _ in range(CLAIM_ROUNDS):
            query = select(t).where(*where).order_by(t.c.priority.desc(), t.c.seq).limit(CLAIM_BATCH)
            candidates = list(self.conn.execute(query).mappings())
            if not candidates:
                return TaskClaimResult(claimed=False, task=None)
            for cand in candidates:
                taken = self.conn.execute(
                    update(t).where(t.c.id == cand["id"], t.c.version == cand["version"], claimable)
                    .values(state="in_progress", owner=msg.agent_id, lease_expires_at=due, version=t.c.version + 1,
                            updated_at=self.now).returning(*t.c)).mappings().first()
                if taken is not None:
                    if rows.lapsed(cand, self.now):
                        self.expired(cand)
                    self.event(cand["id"], "claimed", msg.agent_id, lease_expires_at=due)
                    self.leases.append(due)
                    return TaskClaimResult(claimed=True, task=TaskRecord(**self.present(taken)))
        return TaskClaimResult(claimed=False, task=None)

    def renew(self, msg: RenewLease) -> TaskRecord:
        task_id = rows.resolve(self.conn, msg.id)
        due = self.now + timedelta(seconds=msg.lease)
        renewed = self.conn.execute(update(t).where(
            t.c.id == task_id, t.c.owner == msg.agent_id, t.c.state == "in_progress", t.c.deleted_at.is_(None),
            t.c.lease_expires_at.is_not(None), t.c.lease_expires_at > self.now,
        ).values(lease_expires_at=due).returning(*t.c)).mappings().first()
        if renewed is None:
            row = self.record(task_id)
            raise LeaseLost(f"{msg.agent_id} holds no valid lease on task {task_id}",
                            details={"state": row["state"], "owner": row["owner"]})
        self.event(task_id, "lease_renewed", msg.agent_id, lease_expires_at=due)
        self.leases.append(due)
        return TaskRecord(**self.present(renewed))

    def release(self, msg: ReleaseTask) -> TaskRecord:
        """Back to pending, unowned and unleased, if ``msg.agent_id`` holds the task under a valid lease; its
        creator is told. ``lease_lost`` otherwise, as for a heartbeat."""
        task_id = rows.resolve(self.conn, msg.id)
        released = self.conn.execute(update(t).where(
            t.c.id == task_id, t.c.owner == msg.agent_id, t.c.state == "in_progress", t.c.deleted_at.is_(None),
            t.c.lease_expires_at.is_not(None), t.c.lease_expires_at > self.now,
        ).values(state="pending", owner=None, lease_expires_at=None, version=t.c.version + 1, updated_at=self.now)
            .returning(*t.c)).mappings().first()
        if released is None:
            row = self.record(task_id)
            raise LeaseLost(f"{msg.agent_id} holds no valid lease on task {task_id}",
                            details={"state": row["state"], "owner": row["owner"]})
        self.event(task_id, "released", msg.agent_id, reason=msg.reason)
        message = f"{msg.agent_id} released the task; pending again: {released['title'][:200]}"
        self.notify(released, "task_released", message, msg.agent_id, released["creator"])
        return TaskRecord(**self.present(released))

    def expire(self, _msg: ExpireLeases) -> datetime | None:
        """Turn every lapsed lease back to pending (recorded in history); the next expiry still ahead."""
        lapsed = [r[0] for r in self.conn.execute(
            select(t.c.id).where(rows.lapsed_clause(self.now)).limit(SWEEP_BATCH))]
        for task_id in lapsed:
            self.current(task_id)
        if len(lapsed) == SWEEP_BATCH:
            return self.now  # more are due: sweep again at once, in a transaction of its own
        return rows.next_expiry(self.conn, self.now)


def _side_effects(row: RowMapping, target: str, actor: str | None) -> dict[str, Any]:
    """Ownership and lease that follow a state change."""
    if target == "pending":
        return {"state": target, "owner": None, "lease_expires_at": None}
    if target == "in_progress":
        return {"state": target, "owner": row["owner"] or actor}
    return {"state": target, "lease_expires_at": None}


def _jsonable(details: dict[str, Any]) -> dict[str, Any]:
    return {k: (v.isoformat() if isinstance(v, datetime) else v) for k, v in details.items() if v is not None}
