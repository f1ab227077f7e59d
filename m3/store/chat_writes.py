"""The verbatim conversation log."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import Connection, func, insert, select

from m3.protocols.messages.memory import WriteChat, WriteChats
from m3.protocols.tools.chatlog import ChatlogWriteBulkResult, ChatlogWriteResult
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
