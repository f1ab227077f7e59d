"""The verbatim conversation log."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import Connection, and_, func, insert, select, update

from m3.errors import NotFound
from m3.protocols.messages.memory import RedactChat, WriteChat, WriteChats
from m3.protocols.tools.chatlog import REDACTED, ChatlogRedactResult, ChatlogWriteBulkResult, ChatlogWriteResult
from m3.store import chat_vectors
from m3.store.filters import chat_isolation_clause
from m3.store.schema import chatlog as c


def append(conn: Connection, msg: WriteChat, now: datetime) -> ChatlogWriteResult:
    """Append one message; ``turn`` defaults to one past the conversation's last turn."""
    turn = msg.turn
    if turn is None:
        last = conn.execute(select(func.max(c.c.turn)).where(c.c.conversation_id == msg.conversation_id)).scalar()
        turn = 0 if last is None else int(last) + 1
    chat_id = str(uuid.uuid4())
    conn.execute(insert(c).values(
        id=chat_id, conversation_id=msg.conversation_id, role=msg.role, content=msg.content,
        agent_id=msg.agent_id, scope=msg.scope, model=msg.model, turn=turn, at=msg.at or now, recorded_at=now,
    ))
    return ChatlogWriteResult(id=chat_id, conversation_id=msg.conversation_id, turn=turn)


def append_all(conn: Connection, msg: WriteChats, now: datetime) -> ChatlogWriteBulkResult:
    """Append every message of ``msg`` in order, in the caller's transaction (so all of them or none)."""
    items = [append(conn, WriteChat(agent_id=msg.agent_id, **entry.model_dump()), now) for entry in msg.messages]
    return ChatlogWriteBulkResult(count=len(items), items=items)


def redact(conn: Connection, msg: RedactChat, now: datetime) -> ChatlogRedactResult:
    """Replace the content of chat row ``msg.id`` by :data:`REDACTED` and record who, when and why (not the old
    text) and drop its vectors. Only the row's own agent may; any other row is ``not_found``, as a row the caller
    cannot see."""
    own = c.c.agent_id.is_(None) if msg.actor is None else c.c.agent_id == msg.actor
    row = conn.execute(select(c.c.seq, c.c.conversation_id, c.c.turn).where(
        and_(c.c.id == msg.id, own, chat_isolation_clause(msg.filter)))).first()
    if row is None:
        raise NotFound(f"no chat message {msg.id!r} of yours", hint="Check the id with chatlog_list or chatlog_search; "
                       "only the agent that wrote a message may redact it.", details={"id": msg.id})
    conn.execute(update(c).where(c.c.seq == row.seq).values(
        content=REDACTED, redacted_at=now, redacted_by=msg.actor, redaction_reason=msg.reason))
    chat_vectors.drop(conn, [msg.id])  # its meaning goes with its words
    return ChatlogRedactResult(id=msg.id, conversation_id=row.conversation_id, turn=row.turn, redacted_at=now,
                               redacted_by=msg.actor, reason=msg.reason)
