"""Changes to agents and their tokens, inside the Writer's transaction (reads: ``agents``).

A changed agent is returned with the status the change gives it: there is no heartbeat age to judge yet.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, insert, select, update

from m3.errors import InvalidArgument, NotFound
from m3.protocols.messages.coordination import AgentHeartbeat, AgentOffline, CreateToken, RegisterAgent, RevokeTokens
from m3.protocols.tools.agents import AgentRecord, AgentRegisterResult
from m3.store.agents import load, public, require
from m3.store.schema import agent_tokens as tk
from m3.store.schema import agents as a


def register(conn: Connection, msg: RegisterAgent, now: datetime) -> AgentRegisterResult:
    """Insert the agent or refresh it (given fields replace stored ones); ``created`` when it is new."""
    row = load(conn, msg.agent_id)
    if row is None:
        conn.execute(insert(a).values(id=msg.agent_id, role=msg.role, description=msg.description,
                                      metadata=dict(msg.metadata or {}), registered_at=now, last_seen_at=now,
                                      offline_at=None))
        created = True
    else:
        values: dict[str, Any] = {"last_seen_at": now, "offline_at": None}
        for name in ("role", "description", "metadata"):
            if getattr(msg, name) is not None:
                values[name] = getattr(msg, name)
        conn.execute(update(a).where(a.c.id == msg.agent_id).values(**values))
        created = False
    return AgentRegisterResult(**public(require(conn, msg.agent_id), "active"), created=created)


def heartbeat(conn: Connection, msg: AgentHeartbeat, now: datetime) -> AgentRecord:
    require(conn, msg.agent_id)
    conn.execute(update(a).where(a.c.id == msg.agent_id).values(last_seen_at=now, offline_at=None))
    return AgentRecord(**public(require(conn, msg.agent_id), "active"))


def offline(conn: Connection, msg: AgentOffline, now: datetime) -> AgentRecord:
    require(conn, msg.agent_id)
    conn.execute(update(a).where(a.c.id == msg.agent_id).values(offline_at=now))
    return AgentRecord(**public(require(conn, msg.agent_id), "offline"))


def create_token(conn: Connection, msg: CreateToken, now: datetime) -> dict[str, Any]:
    if load(conn, msg.agent_id) is None:
        register(conn, RegisterAgent(agent_id=msg.agent_id), now)
    token_id = str(uuid.uuid4())
    conn.execute(insert(tk).values(id=token_id, agent_id=msg.agent_id, token_hash=msg.token_hash, label=msg.label,
                                   created_at=now, revoked_at=None))
    return {"id": token_id, "agent_id": msg.agent_id, "label": msg.label, "created_at": now}


def revoke_tokens(conn: Connection, msg: RevokeTokens, now: datetime) -> list[str]:
    """Revoke by token id or by agent; the ids revoked now (already revoked ones are not repeated)."""
    if (msg.token_id is None) == (msg.agent_id is None):
        raise InvalidArgument("give a token id or an agent, not both or neither")
    where = tk.c.id == msg.token_id if msg.token_id is not None else tk.c.agent_id == msg.agent_id
    found = list(conn.execute(select(tk.c.id, tk.c.revoked_at).where(where)))
    if not found:
        what = f"token {msg.token_id!r}" if msg.token_id is not None else f"token of agent {msg.agent_id!r}"
        raise NotFound(f"no {what}", hint="`m3 token list` shows every token id.")
    fresh = [row[0] for row in found if row[1] is None]
    if fresh:
        conn.execute(update(tk).where(tk.c.id.in_(fresh)).values(revoked_at=now))
    return fresh
