"""Handlers of memory_share and memory_unshare: the Writer checks ownership and records the change."""

from __future__ import annotations

from typing import TYPE_CHECKING

from m3.gateway.registry import Handler
from m3.gateway.tools.memory import resolve
from m3.protocols.messages.memory import ShareMemory
from m3.protocols.tools import sharing as p

if TYPE_CHECKING:
    from m3.gateway.service import CallContext, Service


async def _share(svc: Service, a: p.MemoryShareArgs, ctx: CallContext, share: bool) -> p.MemoryShareResult:
    memory_id = await resolve(svc, ctx, a.id, change=False)  # a grantee learns it is not the owner (forbidden)
    out = await svc.ask(svc.system.writer, ShareMemory(id=memory_id, agents=tuple(a.agents), share=share,
                                                       actor=ctx.agent_id))
    return p.MemoryShareResult(**out)


async def memory_share(svc: Service, a: p.MemoryShareArgs, ctx: CallContext) -> p.MemoryShareResult:
    return await _share(svc, a, ctx, True)


async def memory_unshare(svc: Service, a: p.MemoryShareArgs, ctx: CallContext) -> p.MemoryShareResult:
    return await _share(svc, a, ctx, False)


HANDLERS: dict[str, Handler] = {"memory_share": memory_share, "memory_unshare": memory_unshare}
