"""Agents and their bearer tokens: rows and reads (the changes are in ``agent_writes``).

An agent's status is derived from its last heartbeat, never stored (docs/coordination.md). Tokens are stored
as the SHA-256 of a high-entropy random string; the string itself is shown once and never kept.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, Connection, RowMapping, and_, or_, select

from m3.crypto.provider import token_digest
from m3.errors import NotFound
from m3.protocols.tools.agents import AgentRecord
from m3.store.schema import agent_tokens as tk
from m3.store.schema import agents as a


@dataclass(frozen=True)
class Liveness:
    """The heartbeat ages that separate active, idle and offline."""

    active_s: float
    offline_s: float

    def status(self, row: RowMapping, now: datetime) -> str:
        if row["offline_at"] is not None:
            return "offline"
        age = (now - row["last_seen_at"]).total_seconds()
        if age <= self.active_s:
            return "active"
        return "idle" if age <= self.offline_s else "offline"

    def clause(self, status: str, now: datetime) -> ColumnElement[bool]:
        """Agents with ``status`` at ``now``, as SQL."""
        active_since = now - timedelta(seconds=self.active_s)
        idle_since = now - timedelta(seconds=self.offline_s)
        online = a.c.offline_at.is_(None)
        if status == "active":
            return and_(online, a.c.last_seen_at >= active_since)
        if status == "idle":
            return and_(online, a.c.last_seen_at < active_since, a.c.last_seen_at >= idle_since)
        return or_(a.c.offline_at.is_not(None), a.c.last_seen_at < idle_since)


def hash_token(token: str) -> str:
    return token_digest(token)


def load(conn: Connection, agent_id: str) -> RowMapping | None:
    return conn.execute(select(a).where(a.c.id == agent_id)).mappings().first()


def require(conn: Connection, agent_id: str, role: str = "agent") -> RowMapping:
    """The registered agent ``agent_id``; NotFound with the closest names otherwise."""
    row = load(conn, agent_id)
    if row is not None:
        return row
    names = [r[0] for r in conn.execute(select(a.c.id).limit(10_000))]
    close = difflib.get_close_matches(agent_id, names, n=3, cutoff=0.6)
    hint = f"Did you mean {', '.join(close)}?" if close else "The agent must call agent_register first."
    raise NotFound(f"no registered {role} named {agent_id!r}", hint=hint, details={"did_you_mean": close})


def public(row: RowMapping, status: str) -> dict[str, Any]:
    """The agent as callers see it (an AgentRecord's fields), with ``status``."""
    return {**{k: row[k] for k in AgentRecord.model_fields if k != "status"}, "status": status}


def token_agent(conn: Connection, token_hash: str) -> str | None:
    """The agent of a live (not revoked) token with this hash, else None."""
    row = conn.execute(select(tk.c.agent_id).where(tk.c.token_hash == token_hash, tk.c.revoked_at.is_(None))).first()
    return None if row is None else str(row[0])


def list_tokens(conn: Connection, agent_id: str | None) -> list[dict[str, Any]]:
    query = select(tk.c.id, tk.c.agent_id, tk.c.label, tk.c.created_at, tk.c.revoked_at).order_by(tk.c.seq)
    if agent_id is not None:
        query = query.where(tk.c.agent_id == agent_id)
    return [dict(row) for row in conn.execute(query).mappings()]


def list_agents(conn: Connection, liveness: Liveness, now: datetime, status: str | None,
                role: str | None) -> list[dict[str, Any]]:
    query = select(a).order_by(a.c.id)
    if status is not None:
        query = query.where(liveness.clause(status, now))
    if role is not None:
        query = query.where(a.c.role == role)
    return [public(row, liveness.status(row, now)) for row in conn.execute(query).mappings()]
