"""The coordination changes the Writer applies: message type → operation inside its transaction.

Each operation returns its reply value and the agents that got a
notification, so that the Writer can wake their routers after the commit.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy import Connection

from m3.protocols.base import Message
from m3.protocols.messages.conflicts import ResolveConflict
from m3.protocols.messages.coordination import (
    AckInbox,
    AckNotifications,
    AgentHeartbeat,
    AgentOffline,
    CreateToken,
    ExpireLeases,
    RegisterAgent,
    RevokeTokens,
    SendHandoff,
    SendNotification,
    TaskChange,
)
from m3.store import agents, conflict_writes, inbox
from m3.store import task_writes as tasks
from m3.store.conflicts import ConflictFilter
from m3.store.filters import isolation_clause

Outcome = tuple[Any, list[str]]
Operation = Callable[[Connection, Any, datetime], Outcome]


def _register(conn: Connection, msg: RegisterAgent, now: datetime) -> Outcome:
    row, created = agents.register(conn, msg, now)
    return (dict(row), created), []


def _heartbeat(conn: Connection, msg: AgentHeartbeat, now: datetime) -> Outcome:
    return dict(agents.heartbeat(conn, msg, now)), []


def _offline(conn: Connection, msg: AgentOffline, now: datetime) -> Outcome:
    return dict(agents.offline(conn, msg, now)), []


def _handoff(conn: Connection, msg: SendHandoff, now: datetime) -> Outcome:
    return inbox.send_handoff(conn, msg, now), [msg.to_agent]


def _notification(conn: Connection, msg: SendNotification, now: datetime) -> Outcome:
    return inbox.send_notification(conn, msg, now), [msg.to_agent]


def _task(conn: Connection, msg: TaskChange, now: datetime) -> Outcome:
    ops = tasks.TaskWrites(conn, now, isolation_clause(msg.reader))
    result = tasks.OPERATIONS[type(msg)](ops, msg)
    return result, ops.notified


def _resolve_conflict(conn: Connection, msg: ResolveConflict, now: datetime) -> Outcome:
    flt = ConflictFilter(reader_agent_id=msg.reader_agent_id, enforce_isolation=msg.enforce_isolation)
    return conflict_writes.resolve_conflict(conn, msg.id, msg.resolution, actor=msg.actor, clock=lambda: now,
                                            flt=flt), []


def _expire(conn: Connection, msg: ExpireLeases, now: datetime) -> Outcome:
    ops = tasks.TaskWrites(conn, now)
    return ops.expire(), ops.notified


OPERATIONS: dict[type[Message], Operation] = {
    RegisterAgent: _register, AgentHeartbeat: _heartbeat, AgentOffline: _offline,
    CreateToken: lambda conn, msg, now: (agents.create_token(conn, msg, now), []),
    RevokeTokens: lambda conn, msg, now: (agents.revoke_tokens(conn, msg, now), []),
    SendHandoff: _handoff, SendNotification: _notification,
    AckInbox: lambda conn, msg, now: (inbox.ack_inbox(conn, msg, now), []),
    AckNotifications: lambda conn, msg, now: (inbox.ack_notifications(conn, msg, now), []),
    ExpireLeases: _expire, ResolveConflict: _resolve_conflict,
    **{cls: _task for cls in tasks.OPERATIONS},
}
