"""Sharing a private memory with named agents: rows of ``memory_grants``, inside the Writer's transaction.

Only the memory's owner may share it or stop sharing it, and only a
``scope=agent`` memory can be shared (``user`` and ``org`` memories are
everyone's already). Every change is recorded in the memory's history
(``shared`` / ``unshared`` with the agents it concerned). The isolation
clause (``m3/store/filters.py``) admits a granted memory to its grantees on
every read path.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, RowMapping, delete, insert, select

from m3.errors import Forbidden, InvalidArgument
from m3.protocols.messages.memory import ShareMemory
from m3.protocols.tools.sharing import MemoryShareResult
from m3.store import agents
from m3.store import memories as rows
from m3.store.schema import memory_grants as g


def grantees(conn: Connection, memory_id: str) -> list[str]:
    """The agents ``memory_id`` is shared with, by name."""
    query = select(g.c.agent_id).where(g.c.memory_id == memory_id).order_by(g.c.agent_id)
    return [r[0] for r in conn.execute(query)]


def _owned(conn: Connection, msg: ShareMemory) -> RowMapping:
    # Found among what the caller may read: a grantee learns it is not the owner (forbidden), others not_found.
    row = rows.load(conn, rows.resolve_id(conn, msg.id, msg.filter))
    if row["agent_id"] is None or row["agent_id"] != msg.actor:
        raise Forbidden(f"only the memory's owner ({row['agent_id']!r}) may change whom it is shared with",
                        hint="Ask its owner to share it, or write what you share with scope 'user' or 'org'.",
                        details={"owner": row["agent_id"]})
    if row["scope"] != "agent":
        raise InvalidArgument(f"memory {row['id']} has scope {row['scope']!r}: every agent reads it already",
                              hint="Only scope=agent memories are private and can be shared with named agents.")
    return row


def apply(conn: Connection, msg: ShareMemory, now: datetime) -> MemoryShareResult:
    """Share (or unshare) ``msg.id`` with ``msg.agents``; the agents it changed for and the grantees after."""
    row = _owned(conn, msg)
    before = set(grantees(conn, row["id"]))
    named = [a for a in dict.fromkeys(msg.agents) if a != row["agent_id"]]
    if msg.share:
        for agent in named:
            agents.require(conn, agent, "agent to share with")
        changed = [a for a in named if a not in before]
        if changed:
            conn.execute(insert(g), [{"memory_id": row["id"], "agent_id": a, "granted_by": msg.actor,
                                      "granted_at": now} for a in changed])
    else:
        changed = [a for a in named if a in before]
        if changed:
            conn.execute(delete(g).where(g.c.memory_id == row["id"], g.c.agent_id.in_(changed)))
    if changed:
        rows.record_events(conn, [rows.event(row["id"], "shared" if msg.share else "unshared", msg.actor, now,
                                             agents=changed)])
    return MemoryShareResult(id=row["id"], changed=changed, shared_with=grantees(conn, row["id"]))
