"""Handlers of the memory tools that are more than one request (the others are declared in their specs)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from m3.gateway.registry import Handler, by_name, owner
from m3.protocols.messages.memory import UpdateMemory
from m3.protocols.tools import memory as p

if TYPE_CHECKING:
    from m3.gateway.service import CallContext, Service


async def memory_update(svc: Service, a: p.MemoryUpdateArgs, ctx: CallContext) -> p.MemoryRecord:
    """The arguments given (not None) become the request's ``changes``; history keeps what they replace."""
    changes: dict[str, Any] = {k: v for k, v in a.model_dump(exclude={"id", "reason"}, exclude_unset=True).items()
                               if v is not None}
    return await svc.ask(svc.system.writer, UpdateMemory(id=a.id, changes=changes, reason=a.reason,
                                                         actor=ctx.agent_id, filter=svc.read_filter(ctx)))


HANDLERS: dict[str, Handler] = by_name(memory_update)

__all__ = ["HANDLERS", "owner"]  # owner: the coordination handlers import it from here
