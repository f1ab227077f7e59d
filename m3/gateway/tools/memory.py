"""Handlers of the memory tools: arguments in, actor messages out, results back."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from m3.errors import ConfirmationRequired, ContentTooLarge, Forbidden, InvalidArgument
from m3.gateway.registry import Handler
from m3.protocols.messages.memory import (
    DeleteMemory,
    GetGraph,
    GetHistory,
    GetMemory,
    LinkMemories,
    NewMemory,
    PinMemory,
    SearchMemories,
    SupersedeMemory,
    UpdateMemory,
    VerifyMemories,
    WriteMemories,
    WriteOutcome,
)
from m3.protocols.tools import memory as p

if TYPE_CHECKING:
    from m3.gateway.service import CallContext, Service


def check_content(svc: Service, content: str) -> None:
    limit: int = svc.config["limits.max_content_chars"]
    if len(content) > limit:
        raise ContentTooLarge(f"content has {len(content)} characters; the limit is {limit}",
                              details={"length": len(content), "limit": limit})


def owner(ctx: CallContext, agent_id: str | None) -> str | None:
    """The agent a call acts as (``agent_id`` or the caller); a token-bound caller may only name itself.

    Every ``agent_id`` argument of every tool goes through here, reads included, so that an agent
    cannot write or read as another through a token.
    """
    if agent_id is not None and ctx.bound and agent_id != ctx.agent_id:
        raise Forbidden(f"this caller acts as agent {ctx.agent_id!r} and cannot act as {agent_id!r}",
                        details={"agent_id": ctx.agent_id})
    return agent_id if agent_id is not None else ctx.agent_id


async def resolve(svc: Service, ctx: CallContext, ref: str, *, change: bool = True) -> str:
    """The full id of a memory visible to ``ctx`` (prefixes allowed); to ``change`` a private memory, ``ctx`` must
    own it (one shared with it through memory_share is read-only to it, and not found)."""
    flt = svc.read_filter(ctx).model_copy(update={"grants": not change})
    record = await svc.ask(svc.system.searcher, GetMemory(id=ref, filter=flt, touch=False))
    return str(record["id"])


async def memory_write(svc: Service, a: p.MemoryWriteArgs, ctx: CallContext) -> p.MemoryWriteResult:
    check_content(svc, a.content)
    mem = NewMemory(
        type=a.type, content=a.content, title=a.title, metadata=a.metadata, scope=a.scope,
        agent_id=owner(ctx, a.agent_id), user_id=a.user_id or ctx.user_id, importance=a.importance,
        pinned=a.pinned, expires_at=a.expires_at, valid_from=a.valid_from, conversation_id=a.conversation_id,
        source=a.source,
    )
    outcomes: list[WriteOutcome] = await svc.ask(svc.system.writer, WriteMemories(memories=(mem,),
                                                                                   actor=ctx.agent_id))
    out = outcomes[0]
    return p.MemoryWriteResult(id=out.id, created=out.created, content_hash=out.content_hash,
                               recorded_at=out.recorded_at, embedding="pending" if out.created else "ready")


async def memory_search(svc: Service, a: p.MemorySearchArgs, ctx: CallContext) -> p.MemorySearchResult:
    k = a.k if a.k is not None else svc.config["search.k"]
    if k > svc.config["limits.max_k"]:
        raise InvalidArgument(f"k={k} is above the limit of {svc.config['limits.max_k']}",
                              hint="Ask for fewer results or raise limits.max_k.")
    if a.agent_id is not None:
        owner(ctx, a.agent_id)
    flt = svc.read_filter(ctx, type=a.type, agent_id=a.agent_id, user_id=a.user_id, scope=a.scope,
                          conversation_id=a.conversation_id, as_of=a.as_of)
    found = await svc.ask(svc.system.searcher, SearchMemories(query=a.query, k=k, filter=flt, explain=a.explain))
    items = [p.SearchItem(**item) for item in found["items"]]
    return p.MemorySearchResult(count=len(items), items=items, query=a.query, grade_with="score")


async def memory_get(svc: Service, a: p.MemoryGetArgs, ctx: CallContext) -> p.MemoryRecord:
    record = await svc.ask(svc.system.searcher, GetMemory(id=a.id, filter=svc.read_filter(ctx)))
    return p.MemoryRecord(**record)


async def memory_supersede(svc: Service, a: p.MemorySupersedeArgs, ctx: CallContext) -> p.MemorySupersedeResult:
    check_content(svc, a.content)
    old_id = await resolve(svc, ctx, a.id)
    out: WriteOutcome = await svc.ask(svc.system.writer, SupersedeMemory(
        old_id=old_id, content=a.content, title=a.title, type=a.type, importance=a.importance,
        metadata=a.metadata, valid_from=a.valid_from, reason=a.reason, actor=ctx.agent_id))
    return p.MemorySupersedeResult(id=out.id, superseded_id=old_id, recorded_at=out.recorded_at)


async def memory_update(svc: Service, a: p.MemoryUpdateArgs, ctx: CallContext) -> p.MemoryRecord:
    changes: dict[str, Any] = {k: v for k, v in a.model_dump(exclude={"id", "reason"}, exclude_unset=True).items()
                               if v is not None}
    if "content" in changes:
        check_content(svc, changes["content"])
    memory_id = await resolve(svc, ctx, a.id)
    record = await svc.ask(svc.system.writer, UpdateMemory(id=memory_id, changes=changes, reason=a.reason,
                                                           actor=ctx.agent_id))
    return p.MemoryRecord(**{k: v for k, v in record.items() if k != "seq"})


async def memory_delete(svc: Service, a: p.MemoryDeleteArgs, ctx: CallContext) -> p.MemoryDeleteResult:
    if a.hard and not a.confirm:
        raise ConfirmationRequired(f"hard delete of {a.id} needs confirm=true")
    memory_id = await resolve(svc, ctx, a.id)
    kind = await svc.ask(svc.system.writer, DeleteMemory(id=memory_id, hard=a.hard, reason=a.reason,
                                                         actor=ctx.agent_id))
    return p.MemoryDeleteResult(id=memory_id, deleted=kind)


async def _pin(svc: Service, ctx: CallContext, ref: str, pinned: bool) -> p.MemoryPinResult:
    memory_id = await resolve(svc, ctx, ref)
    record = await svc.ask(svc.system.writer, PinMemory(id=memory_id, pinned=pinned, actor=ctx.agent_id))
    return p.MemoryPinResult(id=memory_id, pinned=bool(record["pinned"]))


async def memory_pin(svc: Service, a: p.MemoryPinArgs, ctx: CallContext) -> p.MemoryPinResult:
    return await _pin(svc, ctx, a.id, True)


async def memory_unpin(svc: Service, a: p.MemoryPinArgs, ctx: CallContext) -> p.MemoryPinResult:
    return await _pin(svc, ctx, a.id, False)


async def memory_history(svc: Service, a: p.MemoryHistoryArgs, ctx: CallContext) -> p.MemoryHistoryResult:
    found = await svc.ask(svc.system.searcher, GetHistory(id=a.id, filter=svc.read_filter(ctx)))
    return p.MemoryHistoryResult(id=found["id"], versions=found["versions"],
                                 events=[p.HistoryEvent(**e) for e in found["events"]])


async def memory_link(svc: Service, a: p.MemoryLinkArgs, ctx: CallContext) -> p.MemoryLinkResult:
    from_id = await resolve(svc, ctx, a.from_id)
    to_id = await resolve(svc, ctx, a.to_id, change=False)  # linking to a memory one may read changes only from_id
    created = await svc.ask(svc.system.writer, LinkMemories(from_id=from_id, to_id=to_id, type=a.type,
                                                            actor=ctx.agent_id))
    return p.MemoryLinkResult(from_id=from_id, to_id=to_id, type=a.type, created=bool(created))


async def memory_graph(svc: Service, a: p.MemoryGraphArgs, ctx: CallContext) -> p.MemoryGraphResult:
    found = await svc.ask(svc.system.searcher, GetGraph(id=a.id, depth=a.depth, filter=svc.read_filter(ctx)))
    return p.MemoryGraphResult(nodes=[p.GraphNode(**n) for n in found["nodes"]],
                               edges=[p.GraphEdge(**e) for e in found["edges"]])


async def memory_verify(svc: Service, a: p.MemoryVerifyArgs, ctx: CallContext) -> p.MemoryVerifyResult:
    found = await svc.ask(svc.system.searcher, VerifyMemories(id=a.id, filter=svc.read_filter(ctx)))
    return p.MemoryVerifyResult(**found)


HANDLERS: dict[str, Handler] = {
    "memory_write": memory_write, "memory_search": memory_search, "memory_get": memory_get,
    "memory_supersede": memory_supersede, "memory_update": memory_update, "memory_delete": memory_delete,
    "memory_pin": memory_pin, "memory_unpin": memory_unpin, "memory_history": memory_history,
    "memory_link": memory_link, "memory_graph": memory_graph, "memory_verify": memory_verify,
}
