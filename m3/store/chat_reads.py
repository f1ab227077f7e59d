"""Reading the verbatim conversation log in order (chatlog_list); search is in :mod:`m3.store.fulltext`."""

from __future__ import annotations

from sqlalchemy import Connection, and_, func, select

from m3.protocols.messages.memory import ListChat
from m3.protocols.tools.chatlog import ChatlogListResult, ChatMessage, ConversationSummary
from m3.store.filters import chat_isolation_clause
from m3.store.schema import chatlog as c


def list_chat(conn: Connection, msg: ListChat) -> ChatlogListResult:
    """A page of one conversation (turn order, then write order) or of the conversations (latest first)."""
    where = [chat_isolation_clause(msg.filter)]
    if msg.filter.scope is not None:
        where.append(c.c.scope == msg.filter.scope)
    if msg.conversation_id is None:
        last = func.max(c.c.at)
        found = conn.execute(
            select(c.c.conversation_id, func.count().label("n"), func.min(c.c.at).label("first"), last.label("last"))
            .where(and_(*where)).group_by(c.c.conversation_id)
            .order_by(last.desc(), c.c.conversation_id).limit(msg.limit))
        conversations = [ConversationSummary(conversation_id=row.conversation_id, messages=int(row.n),
                                             first_at=row.first, last_at=row.last) for row in found]
        return ChatlogListResult(count=len(conversations), items=[], conversations=conversations,
                                 next_after_turn=None)
    where.append(c.c.conversation_id == msg.conversation_id)
    if msg.after_turn is not None:
        where.append(c.c.turn > msg.after_turn)
    rows = conn.execute(select(c).where(and_(*where)).order_by(c.c.turn, c.c.seq).limit(msg.limit)).all()
    items = [ChatMessage(id=r.id, conversation_id=r.conversation_id, role=r.role, content=r.content, turn=r.turn,
                         at=r.at, agent_id=r.agent_id, scope=r.scope, model=r.model,
                         redacted_at=r.redacted_at) for r in rows]
    more = len(items) == msg.limit
    return ChatlogListResult(count=len(items), items=items, conversations=[],
                             next_after_turn=items[-1].turn if more else None)
