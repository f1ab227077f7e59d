"""Handlers of the conflicts tools: list pairs kept apart by the anchor check, and settle them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from m3.gateway.registry import Handler
from m3.gateway.tools.memory import owner
from m3.protocols.messages.conflicts import ListConflicts, ResolveConflict
from m3.protocols.tools import conflicts as p

if TYPE_CHECKING:
    from m3.gateway.service import CallContext, Service


async def conflicts_list(svc: Service, a: p.ConflictsListArgs, ctx: CallContext) -> p.ConflictsListResult:
    flt = svc.read_filter(ctx)
    found = await svc.ask(svc.system.directory, ListConflicts(
        status=None if a.status == "all" else a.status, kind=a.kind, memory_id=a.memory_id,
        agent_id=owner(ctx, a.agent_id) if a.agent_id is not None else None, user_id=a.user_id,
        reader_agent_id=flt.reader_agent_id, enforce_isolation=flt.enforce_isolation, limit=a.limit))
    return p.ConflictsListResult(count=len(found), items=[p.ConflictRecord(**row) for row in found])


async def conflicts_resolve(svc: Service, a: p.ConflictsResolveArgs, ctx: CallContext) -> p.ConflictRecord:
    flt = svc.read_filter(ctx)
    done = await svc.ask(svc.system.writer, ResolveConflict(
        id=a.id, resolution=a.resolution, actor=ctx.agent_id, reader_agent_id=flt.reader_agent_id,
        enforce_isolation=flt.enforce_isolation))
    return p.ConflictRecord(**done)


HANDLERS: dict[str, Handler] = {"conflicts_list": conflicts_list, "conflicts_resolve": conflicts_resolve}
