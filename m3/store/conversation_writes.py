"""Changes to whole conversations (conversations_delete, _redact, _promote) and the record of them.

Each change touches only the rows the acting agent wrote (``chatlog.agent_id``), as chatlog_redact does; a
conversation where it wrote nothing is not_found, as one it cannot see. Every change appends a
``conversation_events`` row (who, when, counts, never the text). Deleting or redacting drops the rows'
vectors, so the semantic leg cannot find what the words no longer say.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, and_, delete, insert, select, update

from m3.errors import NotFound
from m3.protocols.messages import conversations as msg
from m3.protocols.messages.memory import Change, NewMemory, WriteMemories
from m3.protocols.tools import conversations as p
from m3.protocols.tools.chatlog import REDACTED
from m3.store import chat_vectors
from m3.store.conversations import PROMOTED_PREFIX, no_conversation, visible
from m3.store.memory_writes import MemoryWrites
from m3.store.schema import chatlog as c
from m3.store.schema import conversation_events as ev
from m3.store.schema import memories as m

#: (memory id, text) of memories written, for the Embedder.
Fresh = list[tuple[str, str]]


def record(conn: Connection, conversation_id: str, event: str, actor: str | None, at: datetime,
           **details: Any) -> None:
    conn.execute(insert(ev).values(conversation_id=conversation_id, event=event, actor=actor, at=at, details=details))


def record_event(conn: Connection, q: msg.RecordConversationEvent, now: datetime) -> None:
    record(conn, q.conversation_id, q.event, q.actor, now, **q.details)


def _own(q: Change, conversation_id: str) -> Any:
    """The acting agent's own rows of the conversation."""
    mine = c.c.agent_id.is_(None) if q.actor is None else c.c.agent_id == q.actor
    return and_(c.c.conversation_id == conversation_id, mine)


def _own_ids(conn: Connection, where: Any, conversation_id: str) -> list[str]:
    ids = [row[0] for row in conn.execute(select(c.c.id).where(where))]
    if not ids:
        raise no_conversation(conversation_id)
    return ids


def delete_conversation(conn: Connection, q: msg.DeleteConversation, now: datetime) -> p.ConversationsDeleteResult:
    ids = _own_ids(conn, _own(q, q.conversation_id), q.conversation_id)
    chat_vectors.drop(conn, ids)
    conn.execute(delete(c).where(c.c.id.in_(ids)))
    record(conn, q.conversation_id, "deleted", q.actor, now, messages=len(ids), reason=q.reason)
    return p.ConversationsDeleteResult(conversation_id=q.conversation_id, deleted=len(ids), at=now)


def redact_conversation(conn: Connection, q: msg.RedactConversation, now: datetime) -> p.ConversationsRedactResult:
    own = _own(q, q.conversation_id)
    _own_ids(conn, own, q.conversation_id)
    ids = [row[0] for row in conn.execute(select(c.c.id).where(own, c.c.redacted_at.is_(None)))]
    if ids:
        chat_vectors.drop(conn, ids)
        conn.execute(update(c).where(c.c.id.in_(ids)).values(
            content=REDACTED, redacted_at=now, redacted_by=q.actor, redaction_reason=q.reason))
    record(conn, q.conversation_id, "redacted", q.actor, now, messages=len(ids), reason=q.reason)
    return p.ConversationsRedactResult(conversation_id=q.conversation_id, redacted=len(ids), at=now)


def promote(conn: Connection, q: msg.PromoteTurns, clock: Callable[[], datetime]) -> tuple[
        p.ConversationsPromoteResult, Fresh]:
    """A memory per chosen turn the actor can read (unredacted), unless the actor already has a current memory
    promoted from that chat row; the memories and the (id, text) to embed."""
    where = [visible(q.filter), c.c.conversation_id == q.conversation_id, c.c.redacted_at.is_(None)]
    if q.turns is not None:
        where.append(c.c.turn.in_(sorted(set(q.turns))))
    rows = conn.execute(select(c).where(and_(*where)).order_by(c.c.turn, c.c.seq).limit(p.MAX_PROMOTE)).all()
    if not rows:
        if q.turns is None:
            raise no_conversation(q.conversation_id)
        raise NotFound(f"no unredacted turn {sorted(set(q.turns))} of {q.conversation_id!r} you can read",
                       hint="See the turns with conversations_get.",
                       details={"conversation_id": q.conversation_id, "turns": sorted(set(q.turns))})
    before = _promoted(conn, [row.id for row in rows], q.actor)
    todo = [row for row in rows if row.id not in before]
    written: dict[str, tuple[str, bool]] = {}  # chat id -> (memory id, created now)
    fresh: Fresh = []
    if todo:
        [(outcomes, fresh)] = MemoryWrites(conn, clock).write_all(
            [WriteMemories(memories=tuple(_memory(q, row) for row in todo), actor=q.actor)])
        written = {row.id: (out.id, out.created) for row, out in zip(todo, outcomes, strict=True)}
        record(conn, q.conversation_id, "promoted", q.actor, clock(), turns=[row.turn for row in todo],
               memories=len(fresh))
    items = [p.PromotedTurn(turn=row.turn, chat_id=row.id, memory_id=before.get(row.id) or written[row.id][0],
                            created=row.id in written and written[row.id][1]) for row in rows]
    return p.ConversationsPromoteResult(conversation_id=q.conversation_id, created=len(fresh), items=items), fresh


def _promoted(conn: Connection, chat_ids: list[str], actor: str | None) -> dict[str, str]:
    """chat id -> the actor's current memory promoted from it, for those of ``chat_ids`` that have one."""
    owner = m.c.agent_id.is_(None) if actor is None else m.c.agent_id == actor
    sources = {PROMOTED_PREFIX + chat_id: chat_id for chat_id in chat_ids}
    rows = conn.execute(select(m.c.source, m.c.id).where(m.c.source.in_(list(sources)), m.c.retired_at.is_(None),
                                                         owner).order_by(m.c.seq)).all()
    return {sources[row.source]: row.id for row in rows}


def _memory(q: msg.PromoteTurns, row: Any) -> NewMemory:
    return NewMemory(
        type=q.type, content=row.content, title=f"{row.role} in {row.conversation_id}, turn {row.turn}",
        metadata={"conversation_id": row.conversation_id, "turn": row.turn, "chat_id": row.id, "role": row.role},
        scope=q.scope or row.scope, agent_id=q.actor, user_id=q.user_id, importance=q.importance,
        valid_from=row.at, conversation_id=row.conversation_id, source=PROMOTED_PREFIX + row.id)
