"""Inboxes (handoffs) and notifications: rows and reads (the changes are in ``inbox_writes``).

A handoff is an inbox row for the receiver, one ``handoff`` link per context memory (``inbox_links``) and a
notification of kind ``handoff`` pointing at it (docs/coordination.md). Context memories are read back
through the reader's isolation clause, in SQL, so a link never reveals a memory its reader may not see.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import ColumnElement, Connection, func, select

from m3.protocols.tools.inbox import InboxItem, Notification
from m3.store.schema import inbox as ib
from m3.store.schema import inbox_links as il
from m3.store.schema import memories as m
from m3.store.schema import notifications as nt

HANDOFF_LINK = "handoff"
#: Characters of a context memory's content shown in an inbox listing.
PREVIEW_CHARS = 500


def read_inbox(conn: Connection, agent_id: str, unread_only: bool, limit: int,
               visible: ColumnElement[bool]) -> list[dict[str, Any]]:
    """The agent's handoffs, newest first, each with the context memories ``visible`` admits."""
    query = select(ib).where(ib.c.agent_id == agent_id)
    if unread_only:
        query = query.where(ib.c.read_at.is_(None))
    rows = list(conn.execute(query.order_by(ib.c.seq.desc()).limit(limit)).mappings())
    context = context_of(conn, [r["id"] for r in rows], visible)
    return [{**{k: r[k] for k in InboxItem.model_fields if k != "context"}, "context": context.get(r["id"], [])}
            for r in rows]


def context_of(conn: Connection, inbox_ids: Sequence[str], visible: ColumnElement[bool]
               ) -> dict[str, list[dict[str, Any]]]:
    """Context memories per handoff, filtered by the reader's visibility in the join itself."""
    if not inbox_ids:
        return {}
    query = (select(il.c.inbox_id, m.c.id, m.c.type, m.c.title, m.c.content, m.c.scope, m.c.agent_id,
                    m.c.retired_at)
             .select_from(il.join(m, m.c.id == il.c.memory_id))
             .where(il.c.inbox_id.in_(list(inbox_ids)), il.c.type == HANDOFF_LINK, visible)
             .order_by(il.c.seq))
    out: dict[str, list[dict[str, Any]]] = {}
    for row in conn.execute(query).mappings():
        out.setdefault(row["inbox_id"], []).append({
            "id": row["id"], "type": row["type"], "title": row["title"], "content": row["content"][:PREVIEW_CHARS],
            "scope": row["scope"], "agent_id": row["agent_id"], "current": row["retired_at"] is None,
        })
    return out


def poll_notifications(conn: Connection, agent_id: str, limit: int) -> list[dict[str, Any]]:
    """The agent's unacknowledged notifications, oldest first."""
    query = (select(nt).where(nt.c.agent_id == agent_id, nt.c.acked_at.is_(None))
             .order_by(nt.c.seq).limit(limit))
    return [{k: row[k] for k in Notification.model_fields} for row in conn.execute(query).mappings()]


def unread_counts(conn: Connection, agent_id: str) -> dict[str, int]:
    inbox_n = conn.execute(select(func.count()).select_from(ib).where(
        ib.c.agent_id == agent_id, ib.c.read_at.is_(None))).scalar_one()
    notes_n = conn.execute(select(func.count()).select_from(nt).where(
        nt.c.agent_id == agent_id, nt.c.acked_at.is_(None))).scalar_one()
    return {"unread_handoffs": int(inbox_n), "unacked_notifications": int(notes_n)}
