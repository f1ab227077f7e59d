"""Task rows as callers see them, and the reads of task trees.

A task holding a lease that has run out *is* pending again, whether or not
a sweep has written that yet: every read and every write sees the
effective state (``lapsed`` as SQL and as Python agree), so the moment a
lease ends does not depend on when a timer fires or which process runs it.
A task's result memory is shown only when the reader may see that memory
(the isolation clause, in the join).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Connection, RowMapping, and_, case, func, null, or_, select, true

from m3.errors import AmbiguousId, NotFound
from m3.protocols.messages.coordination import TaskFilter
from m3.protocols.tools.tasks import TaskRecord
from m3.store import visibility
from m3.store.schema import memories as m
from m3.store.schema import task_events as ev
from m3.store.schema import tasks as t

TERMINAL = frozenset({"completed", "cancelled"})
#: Legal state changes. failed → pending is a retry; completed and cancelled are final.
TRANSITIONS: dict[str, frozenset[str]] = {
    "pending": frozenset({"in_progress", "blocked", "cancelled"}),
    "in_progress": frozenset({"pending", "blocked", "completed", "failed", "cancelled"}),
    "blocked": frozenset({"pending", "in_progress", "failed", "cancelled"}),
    "failed": frozenset({"pending"}),
    "completed": frozenset(),
    "cancelled": frozenset(),
}
FULL_ID = 36


def lapsed_clause(now: datetime) -> ColumnElement[bool]:
    """Tasks whose lease has run out: in progress under a lease that ended at or before ``now``."""
    return and_(t.c.state == "in_progress", t.c.lease_expires_at.is_not(None), t.c.lease_expires_at <= now)


def lapsed(row: RowMapping | dict[str, Any], now: datetime) -> bool:
    lease = row["lease_expires_at"]
    return bool(row["state"] == "in_progress" and lease is not None and lease <= now)


def held_by_other_clause(actor: str | None, now: datetime) -> ColumnElement[bool]:
    """Tasks under a valid lease held by someone other than ``actor`` (who may then not change them)."""
    holder = true() if actor is None else or_(t.c.owner.is_(None), t.c.owner != actor)
    return and_(t.c.state == "in_progress", t.c.lease_expires_at.is_not(None), t.c.lease_expires_at > now, holder)


def held_by_other(row: RowMapping | dict[str, Any], actor: str | None, now: datetime) -> bool:
    """:func:`held_by_other_clause` for one row, in Python (the two agree)."""
    lease = row["lease_expires_at"]
    return bool(row["state"] == "in_progress" and lease is not None and lease > now and row["owner"] != actor)


def claimable_clause(agent_id: str, now: datetime) -> ColumnElement[bool]:
    """Pending (also by lapse) and either unowned or assigned to ``agent_id``; never deleted."""
    return and_(t.c.deleted_at.is_(None), or_(
        and_(t.c.state == "pending", or_(t.c.owner.is_(None), t.c.owner == agent_id)),
        lapsed_clause(now),
    ))


def filter_clauses(flt: TaskFilter, now: datetime) -> list[ColumnElement[bool]]:
    clauses: list[ColumnElement[bool]] = []
    if not flt.include_deleted:
        clauses.append(t.c.deleted_at.is_(None))
    # The effective state and owner: a lapsed lease reads as pending and unowned.
    if flt.state is not None:
        clauses.append(case((lapsed_clause(now), "pending"), else_=t.c.state) == flt.state)
    if flt.owner is not None:
        clauses.append(case((lapsed_clause(now), null()), else_=t.c.owner) == flt.owner)
    return clauses + [t.c[name] == getattr(flt, name) for name in ("kind", "creator", "parent_id")
                      if getattr(flt, name) is not None]


def _select(visible: ColumnElement[bool]) -> Any:
    """Task columns plus the result memory id only where the reader may see that memory."""
    shown = m.c.id.label("visible_result_id")
    return select(t, shown).select_from(t.outerjoin(m, and_(m.c.id == t.c.result_memory_id, visible)))


def record(row: RowMapping, now: datetime) -> dict[str, Any]:
    """The caller's view of a task row (a TaskRecord's fields): effective state and owner, visible result only."""
    out = {k: row[k] for k in TaskRecord.model_fields}
    out["result_memory_id"] = row["visible_result_id"] if "visible_result_id" in row else row["result_memory_id"]
    if lapsed(row, now):
        out.update(state="pending", owner=None, lease_expires_at=None)
    return out


def not_found(ref: str) -> NotFound:
    return NotFound(f"no task with id {ref!r}", hint="task_list shows the tasks and their ids.")


def resolve(conn: Connection, ref: str) -> str:
    """The full id of a task from its id or a unique prefix of 8+ characters.

    A full-length id is returned as it is, without a query: loading it says whether it exists.
    """
    ref = ref.strip().lower()
    if len(ref) == FULL_ID or conn.execute(select(t.c.id).where(t.c.id == ref)).first():
        return ref
    found = [r[0] for r in conn.execute(select(t.c.id).where(t.c.id.startswith(ref, autoescape=True)).limit(3))]
    if len(ref) < 8 or not found:
        raise not_found(ref)
    if len(found) > 1:
        raise AmbiguousId(f"prefix {ref!r} matches several tasks", details={"candidates": found})
    return str(found[0])


def existing(conn: Connection, ref: str) -> str:
    """The full id of an existing task from its id or a unique prefix; NotFound otherwise."""
    task_id = resolve(conn, ref)
    if conn.execute(select(t.c.id).where(t.c.id == task_id)).first() is None:
        raise not_found(ref)
    return task_id


def get(conn: Connection, ref: str, now: datetime, visible: ColumnElement[bool]) -> dict[str, Any]:
    task_id = resolve(conn, ref)
    row = conn.execute(_select(visible).where(t.c.id == task_id)).mappings().first()
    if row is None:
        raise not_found(ref)
    return record(row, now)


def history(conn: Connection, task_id: str, visible: ColumnElement[bool]) -> list[dict[str, Any]]:
    """The task's events; a memory id in them (a result) only where ``visible`` admits that memory."""
    query = select(ev.c.event, ev.c.actor, ev.c.at, ev.c.details).where(ev.c.task_id == task_id).order_by(ev.c.seq)
    return visibility.events(conn, [dict(r) for r in conn.execute(query).mappings()], visible)


def list_tasks(conn: Connection, flt: TaskFilter, limit: int, now: datetime,
               visible: ColumnElement[bool]) -> list[dict[str, Any]]:
    if flt.parent_id is not None:
        flt = flt.model_copy(update={"parent_id": existing(conn, flt.parent_id)})
    query = _select(visible).where(*filter_clauses(flt, now)).order_by(t.c.priority.desc(), t.c.seq).limit(limit)
    return [record(r, now) for r in conn.execute(query).mappings()]


def tree(conn: Connection, ref: str, depth: int, include_deleted: bool, now: datetime,
         visible: ColumnElement[bool]) -> dict[str, Any]:
    """The task and its descendants down to ``depth`` levels, each with ``children`` and ``child_count``."""
    root = get(conn, ref, now, visible)
    nodes = {root["id"]: root}
    frontier = [root["id"]]
    for _ in range(depth):
        found = [record(row, now) for row in _children(conn, frontier, include_deleted, visible)]
        nodes.update((node["id"], node) for node in found)
        frontier = [node["id"] for node in found]
        if not frontier:
            break
    counts = _child_counts(conn, list(nodes), include_deleted)
    for node in nodes.values():
        node.update(children=[], child_count=counts.get(node["id"], 0))
    for node in sorted(nodes.values(), key=lambda n: (-n["priority"], n["created_at"])):
        parent = nodes.get(node["parent_id"]) if node["id"] != root["id"] else None
        if parent is not None:
            parent["children"].append(node)
    return root


def _children(conn: Connection, parents: Sequence[str], include_deleted: bool,
              visible: ColumnElement[bool]) -> list[RowMapping]:
    query = _select(visible).where(t.c.parent_id.in_(list(parents)))
    if not include_deleted:
        query = query.where(t.c.deleted_at.is_(None))
    return list(conn.execute(query.order_by(t.c.seq)).mappings())


def _child_counts(conn: Connection, ids: Sequence[str], include_deleted: bool) -> dict[str, int]:
    query = select(t.c.parent_id, func.count()).where(t.c.parent_id.in_(list(ids))).group_by(t.c.parent_id)
    if not include_deleted:
        query = query.where(t.c.deleted_at.is_(None))
    return {str(p): int(n) for p, n in conn.execute(query)}


def next_expiry(conn: Connection, now: datetime) -> datetime | None:
    """When the next lease still running ends."""
    query = select(func.min(t.c.lease_expires_at)).where(
        t.c.state == "in_progress", t.c.lease_expires_at.is_not(None), t.c.lease_expires_at > now)
    value: datetime | None = conn.execute(query).scalar()
    return value
