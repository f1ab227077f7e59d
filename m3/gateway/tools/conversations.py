"""Handlers of the conversations tools that orchestrate: search (chatlog_search's hits grouped by
conversation) and summarise (read the turns, pick sentences, optionally store the summary as a memory).

Both read through the Searcher with the caller's read filter (isolation as configured), as the generic route
would build it; a stored summary is written by the Writer like memory_write. The rest of the domain are
declarations (m3/protocols/tools/conversations.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from m3.gateway.registry import owner
from m3.protocols.messages import conversations as cv
from m3.protocols.messages.memory import MemoryFilter, SearchChat, WriteMemory
from m3.protocols.tools import conversations as p
from m3.protocols.tools.chatlog import ChatItem
from m3.retrieval import extractive

if TYPE_CHECKING:
    from m3.gateway.service import CallContext, Service

#: How many chat hits one conversation hit is chosen from, per conversation asked for.
HITS_PER_CONVERSATION = 10


def _filter(svc: Service, ctx: CallContext, scope: str | None = None) -> MemoryFilter:
    """The caller's read filter, as the generic route builds it."""
    return MemoryFilter(reader_agent_id=ctx.agent_id, enforce_isolation=svc.config["isolation.enforce"], scope=scope)


async def conversations_search(svc: Service, a: p.ConversationsSearchArgs, ctx: CallContext
                               ) -> p.ConversationsSearchResult:
    k = min(a.k * HITS_PER_CONVERSATION, svc.config["limits.max_k"])
    found = await svc.ask(svc.system.searcher, SearchChat(query=a.query, k=k, role=a.role,
                                                          filter=_filter(svc, ctx, a.scope)))
    best: dict[str, ChatItem] = {}
    counts: dict[str, int] = {}
    for item in found.items:  # best first: a conversation's first hit is its best
        best.setdefault(item.conversation_id, item)
        counts[item.conversation_id] = counts.get(item.conversation_id, 0) + 1
    items = [p.ConversationHit(conversation_id=cid, score=hit.score, hits=counts[cid], best=hit)
             for cid, hit in list(best.items())[: a.k]]
    return p.ConversationsSearchResult(count=len(items), items=items, query=a.query)


async def conversations_summarise(svc: Service, a: p.ConversationsSummariseArgs, ctx: CallContext
                                  ) -> p.ConversationsSummariseResult:
    flt = _filter(svc, ctx)
    read = await svc.ask(svc.system.searcher, cv.GetConversation(
        conversation_id=a.conversation_id, limit=p.MAX_TURN_PAGE, memories=False, filter=flt))
    said = [(t.turn, t.content) for t in read.turns if t.redacted_at is None and t.role in ("user", "assistant")]
    picked = extractive.summarise(said, a.sentences)
    summary = " ".join(s.text for s in picked)
    memory_id = None
    if a.store and summary:
        agent = owner(ctx, None)
        written = await svc.ask(svc.system.writer, WriteMemory(
            type="summary", content=summary, title=f"Summary of conversation {a.conversation_id}",
            metadata={"method": "extractive", "turns": [s.turn for s in picked]}, agent_id=agent,
            user_id=ctx.user_id, conversation_id=a.conversation_id, source="conversations_summarise", actor=agent))
        memory_id = written.id
        await svc.ask(svc.system.writer, cv.RecordConversationEvent(
            conversation_id=a.conversation_id, event="summarised", actor=agent,
            details={"memory_id": memory_id, "sentences": len(picked)}))
    return p.ConversationsSummariseResult(
        conversation_id=a.conversation_id, summary=summary, method="extractive", turns=len(read.turns),
        sentences=[p.SummarySentence(text=s.text, turn=s.turn, score=s.score) for s in picked], memory_id=memory_id)
