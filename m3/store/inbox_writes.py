"""Changes to inboxes and notifications, inside the Writer's transaction (reads: ``inbox``)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, insert, select, update

from m3.errors import NotFound
from m3.protocols.messages.coordination import AckInbox, AckNotifications, SendHandoff, SendNotification
from m3.protocols.tools.inbox import (
    MemoryHandoffResult,
    MemoryInboxAckResult,
    NotificationsAckResult,
    NotifyResult,
)
from m3.store import agents, memories, tasks
from m3.store.inbox import HANDOFF_LINK
from m3.store.schema import inbox as ib
from m3.store.schema import inbox_links as il
from m3.store.schema import notifications as nt

_ADD_NOTIFICATION = insert(nt)  # built once: the statement memoises its cache key


def notify(conn: Connection, *, to_agent: str, kind: str, message: str, now: datetime, from_agent: str | None = None,
           ref_id: str | None = None, data: dict[str, Any] | None = None) -> str:
    """Add one notification; its id."""
    notification_id = str(uuid.uuid4())
    conn.execute(_ADD_NOTIFICATION, {"id": notification_id, "agent_id": to_agent, "kind": kind,
                                     "from_agent": from_agent, "message": message, "ref_id": ref_id,
                                     "data": dict(data or {}), "created_at": now, "acked_at": None})
    return notification_id


def send_notification(conn: Connection, msg: SendNotification, now: datetime) -> NotifyResult:
    agents.require(conn, msg.to_agent, "recipient agent")
    notification_id = notify(conn, to_agent=msg.to_agent, kind=msg.kind, message=msg.message, now=now,
                             from_agent=msg.from_agent, data=msg.data)
    return NotifyResult(id=notification_id, to_agent=msg.to_agent, created_at=now)


def send_handoff(conn: Connection, msg: SendHandoff, now: datetime) -> MemoryHandoffResult:
    """Put a handoff in the receiver's inbox, link its context (memories the receiver may read) and notify it."""
    context = list(dict.fromkeys(memories.shareable(conn, msg.context_ids, msg.filter, msg.to_agent)))
    task_id = None if msg.task_id is None else tasks.existing(conn, msg.task_id)
    agents.require(conn, msg.to_agent, "recipient agent")
    inbox_id = str(uuid.uuid4())
    conn.execute(insert(ib).values(id=inbox_id, agent_id=msg.to_agent, from_agent=msg.from_agent, task=msg.task,
                                   note=msg.note, task_id=task_id, created_at=now, read_at=None))
    if context:
        conn.execute(insert(il), [{"inbox_id": inbox_id, "memory_id": i, "type": HANDOFF_LINK} for i in context])
    notification_id = notify(conn, to_agent=msg.to_agent, kind="handoff", message=_headline(msg), now=now,
                             from_agent=msg.from_agent, ref_id=inbox_id,
                             data={"inbox_id": inbox_id, "task_id": task_id})
    return MemoryHandoffResult(id=inbox_id, to_agent=msg.to_agent, from_agent=msg.from_agent, created_at=now,
                               notification_id=notification_id, context_ids=context)


def _headline(msg: SendHandoff) -> str:
    first = msg.task.strip().splitlines()[0] if msg.task.strip() else msg.task
    sender = msg.from_agent or "someone"
    return f"handoff from {sender}: {first[:200]}"


def ack_inbox(conn: Connection, msg: AckInbox, now: datetime) -> MemoryInboxAckResult:
    """Mark the agent's handoffs read (and their notifications acknowledged); the ids changed now."""
    owned = {r[0]: r[1] for r in conn.execute(
        select(ib.c.id, ib.c.read_at).where(ib.c.id.in_(list(msg.ids)), ib.c.agent_id == msg.agent_id))}
    unknown = [i for i in msg.ids if i not in owned]
    if unknown:
        raise NotFound(f"no handoff {unknown[0]!r} in the inbox of {msg.agent_id!r}",
                       hint="memory_inbox lists the handoff ids.", details={"unknown": unknown})
    fresh = [i for i, read_at in owned.items() if read_at is None]
    if fresh:
        conn.execute(update(ib).where(ib.c.id.in_(fresh)).values(read_at=now))
        conn.execute(update(nt).where(nt.c.ref_id.in_(fresh), nt.c.agent_id == msg.agent_id,
                                      nt.c.acked_at.is_(None)).values(acked_at=now))
    return MemoryInboxAckResult(acked=fresh)


def ack_notifications(conn: Connection, msg: AckNotifications, now: datetime) -> NotificationsAckResult:
    """Acknowledge the agent's notifications (the given ids, or all); how many changed now."""
    where = [nt.c.agent_id == msg.agent_id, nt.c.acked_at.is_(None)]
    if msg.ids is not None:
        known = {r[0] for r in conn.execute(
            select(nt.c.id).where(nt.c.id.in_(list(msg.ids)), nt.c.agent_id == msg.agent_id))}
        unknown = [i for i in msg.ids if i not in known]
        if unknown:
            raise NotFound(f"no notification {unknown[0]!r} for {msg.agent_id!r}",
                           hint="notifications_poll lists the notification ids.", details={"unknown": unknown})
        where.append(nt.c.id.in_(list(msg.ids)))
    return NotificationsAckResult(acked=int(conn.execute(update(nt).where(*where).values(acked_at=now)).rowcount))
