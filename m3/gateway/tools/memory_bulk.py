"""memory_write_bulk: many memory_write items as one Writer request (one transaction)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from m3.gateway.registry import owner
from m3.protocols.messages.memory import NewMemory, WriteMemories
from m3.protocols.tools.memory import MemoryWriteArgs, MemoryWriteResult
from m3.protocols.tools.memory_lists import MemoryWriteBulkArgs, MemoryWriteBulkResult

if TYPE_CHECKING:
    from m3.gateway.service import CallContext, Service


def _new(item: MemoryWriteArgs, ctx: CallContext) -> NewMemory:
    """The item as memory_write would write it: owned by the caller unless it names an agent (a token-bound
    caller may name only itself), about the caller's user unless it names one."""
    values = item.model_dump()
    values["agent_id"] = owner(ctx, item.agent_id)
    values["user_id"] = item.user_id if item.user_id is not None else ctx.user_id
    return NewMemory(**values)


async def memory_write_bulk(svc: Service, a: MemoryWriteBulkArgs, ctx: CallContext) -> MemoryWriteBulkResult:
    memories = tuple(_new(item, ctx) for item in a.memories)
    outcomes = await svc.ask(svc.system.writer, WriteMemories(memories=memories, actor=ctx.agent_id))
    items = [MemoryWriteResult(id=o.id, created=o.created, content_hash=o.content_hash, recorded_at=o.recorded_at,
                               embedding="pending") for o in outcomes]
    return MemoryWriteBulkResult(count=len(items), created=sum(i.created for i in items), items=items)
