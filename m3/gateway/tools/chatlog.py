"""Handlers of the chat-log tools."""

from __future__ import annotations

from typing import TYPE_CHECKING

from m3.errors import InvalidArgument
from m3.gateway.registry import Handler
from m3.gateway.tools.memory import check_content, owner
from m3.protocols.messages.memory import ChatOutcome, SearchChat, WriteChat
from m3.protocols.tools import chatlog as p

if TYPE_CHECKING:
    from m3.gateway.service import CallContext, Service


async def chatlog_write(svc: Service, a: p.ChatlogWriteArgs, ctx: CallContext) -> p.ChatlogWriteResult:
    check_content(svc, a.content)
    out: ChatOutcome = await svc.ask(svc.system.writer, WriteChat(
        conversation_id=a.conversation_id, role=a.role, content=a.content, agent_id=owner(ctx, a.agent_id),
        scope=a.scope, model=a.model, turn=a.turn, at=a.at))
    return p.ChatlogWriteResult(id=out.id, conversation_id=out.conversation_id, turn=out.turn)


async def chatlog_search(svc: Service, a: p.ChatlogSearchArgs, ctx: CallContext) -> p.ChatlogSearchResult:
    k = a.k if a.k is not None else svc.config["search.k"]
    if k > svc.config["limits.max_k"]:
        raise InvalidArgument(f"k={k} is above the limit of {svc.config['limits.max_k']}")
    if a.agent_id is not None:
        owner(ctx, a.agent_id)
    found = await svc.ask(svc.system.searcher, SearchChat(query=a.query, k=k, conversation_id=a.conversation_id,
                                                          role=a.role, agent_id=a.agent_id,
                                                          filter=svc.read_filter(ctx, scope=a.scope)))
    items = [p.ChatItem(**item) for item in found["items"]]
    return p.ChatlogSearchResult(count=len(items), items=items, query=a.query)


HANDLERS: dict[str, Handler] = {"chatlog_write": chatlog_write, "chatlog_search": chatlog_search}
