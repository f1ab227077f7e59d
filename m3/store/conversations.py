"""Reads of whole conversations and single chat rows (conversations_*, chatlog_get/context/stats).

Every read narrows the chat log with :func:`chat_isolation_clause` (and memories with
:func:`isolation_clause`), as chatlog_list does: a reader sees its own rows and those of scope user or org.
Memories promoted from a turn carry ``source = "chat:<chat id>"`` and the turn in their metadata
(:mod:`m3.store.conversation_writes`).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from sqlalchemy import Connection, and_, distinct, func, select

from m3.errors import NotFound
from m3.protocols.messages import conversations as msg
from m3.protocols.messages.memory import MemoryFilter
from m3.protocols.tools import chat_reads as cr
from m3.protocols.tools import conversations as p
from m3.protocols.tools.chatlog import ChatMessage
from m3.store import chat_vectors
from m3.store.filters import chat_isolation_clause, isolation_clause
from m3.store.schema import chatlog as c
from m3.store.schema import conversation_events as ev
from m3.store.schema import memories as m

#: ``memories.source`` of a memory promoted from chat row <id>: ``chat:<id>``.
PROMOTED_PREFIX = "chat:"


def visible(flt: MemoryFilter) -> Any:
    """The chat rows ``flt`` may read (isolation and its scope)."""
    where = [chat_isolation_clause(flt)]
    if flt.scope is not None:
        where.append(c.c.scope == flt.scope)
    return and_(*where)


def message(row: Any) -> ChatMessage:
    return ChatMessage(id=row.id, conversation_id=row.conversation_id, role=row.role, content=row.content,
                       turn=row.turn, at=row.at, agent_id=row.agent_id, scope=row.scope, model=row.model,
                       redacted_at=row.redacted_at)


def no_conversation(conversation_id: str) -> NotFound:
    return NotFound(f"no conversation {conversation_id!r} you can read",
                    hint="List the conversations you can see with conversations_list.",
                    details={"conversation_id": conversation_id})


# -- conversations ------------------------------------------------------------------------------


def list_conversations(conn: Connection, q: msg.ListConversations) -> p.ConversationsListResult:
    where = visible(q.filter)
    last = func.max(c.c.at)
    found = conn.execute(
        select(c.c.conversation_id, func.count().label("n"), func.min(c.c.at).label("first"), last.label("last"))
        .where(where).group_by(c.c.conversation_id)
        .order_by(last.desc(), c.c.conversation_id).offset(q.offset).limit(q.limit + 1)).all()
    page = found[:q.limit]
    agents, roles = _participants(conn, [row.conversation_id for row in page], where)
    items = [p.ConversationInfo(conversation_id=row.conversation_id, messages=int(row.n), first_at=row.first,
                                last_at=row.last, agents=agents[row.conversation_id], roles=roles[row.conversation_id])
             for row in page]
    return p.ConversationsListResult(count=len(items), items=items,
                                     next_offset=q.offset + q.limit if len(found) > q.limit else None)


def _participants(conn: Connection, ids: list[str], where: Any) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    agents: dict[str, list[str]] = defaultdict(list)
    roles: dict[str, list[str]] = defaultdict(list)
    if ids:
        pairs = conn.execute(select(c.c.conversation_id, c.c.agent_id, c.c.role).distinct()
                             .where(where, c.c.conversation_id.in_(ids))).all()
        for row in sorted(pairs, key=lambda r: (r[0], r[1] or "", r[2])):
            if row.agent_id is not None and row.agent_id not in agents[row.conversation_id]:
                agents[row.conversation_id].append(row.agent_id)
            if row.role not in roles[row.conversation_id]:
                roles[row.conversation_id].append(row.role)
    return agents, roles


def get_conversation(conn: Connection, q: msg.GetConversation) -> p.ConversationsGetResult:
    where = [visible(q.filter), c.c.conversation_id == q.conversation_id]
    if q.after_turn is not None:
        where.append(c.c.turn > q.after_turn)
    rows = conn.execute(select(c).where(and_(*where)).order_by(c.c.turn, c.c.seq).limit(q.limit)).all()
    memories = _memories(conn, q.conversation_id, q.filter) if q.memories else []
    if not rows and not memories and not _exists(conn, q.conversation_id, q.filter):
        raise no_conversation(q.conversation_id)
    more = len(rows) == q.limit
    return p.ConversationsGetResult(conversation_id=q.conversation_id, count=len(rows),
                                    turns=[message(r) for r in rows], memories=memories,
                                    next_after_turn=rows[-1].turn if more else None)


def _exists(conn: Connection, conversation_id: str, flt: MemoryFilter) -> bool:
    """Whether the reader sees any chat row or current memory of the conversation."""
    chat = conn.execute(select(c.c.seq).where(visible(flt), c.c.conversation_id == conversation_id).limit(1)).first()
    return chat is not None or bool(_memories(conn, conversation_id, flt, limit=1))


def _memories(conn: Connection, conversation_id: str, flt: MemoryFilter,
              limit: int = 1000) -> list[p.ConversationMemory]:
    rows = conn.execute(select(m.c.id, m.c.type, m.c.title, m.c.content, m.c.source, m.c.recorded_at, m.c.metadata)
                        .where(m.c.conversation_id == conversation_id, m.c.retired_at.is_(None),
                               isolation_clause(flt)).order_by(m.c.seq).limit(limit)).all()
    return [p.ConversationMemory(id=r.id, type=r.type, title=r.title, content=r.content, source=r.source,
                                 recorded_at=r.recorded_at, turn=_promoted_turn(r.source, r.metadata)) for r in rows]


def _promoted_turn(source: str | None, metadata: Any) -> int | None:
    if not source or not source.startswith(PROMOTED_PREFIX) or not isinstance(metadata, dict):
        return None
    turn = metadata.get("turn")
    return turn if isinstance(turn, int) else None


def conversation_stats(conn: Connection, q: msg.ConversationStats, model: str) -> p.ConversationsStatsResult:
    where = and_(visible(q.filter), c.c.conversation_id == q.conversation_id)
    rows = conn.execute(select(c.c.role, c.c.agent_id, c.c.content, c.c.at, c.c.redacted_at).where(where)).all()
    if not rows:
        raise no_conversation(q.conversation_id)
    by_role: dict[str, int] = defaultdict(int)
    for row in rows:
        by_role[row.role] += 1
    memories = _memories(conn, q.conversation_id, q.filter)
    first, last = min(r.at for r in rows), max(r.at for r in rows)
    return p.ConversationsStatsResult(
        conversation_id=q.conversation_id, messages=len(rows), by_role=dict(sorted(by_role.items())),
        agents=sorted({r.agent_id for r in rows if r.agent_id is not None}),
        words=sum(len(r.content.split()) for r in rows), redacted=sum(r.redacted_at is not None for r in rows),
        embedded=chat_vectors.count(conn, model, where), memories=len(memories),
        promoted=sum(mem.turn is not None for mem in memories), first_at=first, last_at=last,
        duration_s=(last - first).total_seconds())


def history(conn: Connection, q: msg.ConversationHistory) -> p.ConversationsHistoryResult:
    """The conversation's events. Shown to a reader who sees a row of it, or who did one of them (a deleted
    conversation has no rows left: its deleter still reads the record); not_found otherwise."""
    rows = conn.execute(select(ev).where(ev.c.conversation_id == q.conversation_id).order_by(ev.c.seq)).all()
    mine = any(r.actor == q.filter.reader_agent_id for r in rows)
    if not rows or not (mine or not q.filter.enforce_isolation or _exists(conn, q.conversation_id, q.filter)):
        raise no_conversation(q.conversation_id)
    return p.ConversationsHistoryResult(conversation_id=q.conversation_id, events=[
        p.ConversationEvent(event=r.event, actor=r.actor, at=r.at, details=dict(r.details)) for r in rows])


# -- single chat rows ---------------------------------------------------------------------------


def get_chat(conn: Connection, q: msg.GetChat) -> cr.ChatlogGetResult:
    where = [visible(q.filter)]
    if q.id is not None:
        where.append(c.c.id == q.id)
    else:
        where += [c.c.conversation_id == q.conversation_id, c.c.turn == q.turn]
    row = conn.execute(select(c).where(and_(*where)).order_by(c.c.seq).limit(1)).first()
    if row is None:
        raise NotFound("no chat message you can read there", hint="Check the id or turn with chatlog_list.",
                       details={k: v for k, v in {"id": q.id, "conversation_id": q.conversation_id,
                                                  "turn": q.turn}.items() if v is not None})
    return cr.ChatlogGetResult(message=message(row))


def chat_context(conn: Connection, q: msg.ChatContext) -> cr.ChatlogContextResult:
    where = visible(q.filter)
    middle = conn.execute(select(c).where(where, c.c.id == q.id)).first()
    if middle is None:
        raise NotFound(f"no chat message {q.id!r} you can read", hint="Check the id with chatlog_search.",
                       details={"id": q.id})
    same = and_(where, c.c.conversation_id == middle.conversation_id)
    # Turn order, then write order (as chatlog_list): before = a smaller (turn, seq), after = a larger one.
    before = (c.c.turn < middle.turn) | ((c.c.turn == middle.turn) & (c.c.seq < middle.seq))
    after = (c.c.turn > middle.turn) | ((c.c.turn == middle.turn) & (c.c.seq > middle.seq))
    earlier = conn.execute(select(c).where(same, before).order_by(c.c.turn.desc(), c.c.seq.desc())
                           .limit(q.before)).all() if q.before else []
    later = conn.execute(select(c).where(same, after).order_by(c.c.turn, c.c.seq)
                         .limit(q.after)).all() if q.after else []
    items = [message(r) for r in [*reversed(earlier), middle, *later]]
    return cr.ChatlogContextResult(conversation_id=middle.conversation_id, id=middle.id, count=len(items), items=items)


def chat_stats(conn: Connection, q: msg.ChatStats, model: str | None) -> cr.ChatlogStatsResult:
    where = visible(q.filter)
    total = conn.execute(select(func.count(), func.count(distinct(c.c.conversation_id)),
                                func.count(distinct(c.c.agent_id)), func.count(c.c.redacted_at),
                                func.min(c.c.at), func.max(c.c.at)).where(where)).one()
    by_role: dict[str, int] = {str(k): int(v) for k, v in conn.execute(
        select(c.c.role, func.count()).where(where).group_by(c.c.role))}
    by_scope: dict[str, int] = {str(k): int(v) for k, v in conn.execute(
        select(c.c.scope, func.count()).where(where).group_by(c.c.scope))}
    embedded = chat_vectors.count(conn, model, where) if model is not None else 0
    return cr.ChatlogStatsResult(
        messages=int(total[0]), conversations=int(total[1]), agents=int(total[2]), redacted=int(total[3]),
        by_role=dict(sorted(by_role.items())), by_scope=dict(sorted(by_scope.items())),
        embedded=embedded, pending=int(total[0]) - int(total[3]) - embedded, model=model,
        first_at=total[4], last_at=total[5])
