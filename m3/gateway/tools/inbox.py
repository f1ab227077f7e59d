"""Handlers of handoffs, inboxes and notifications that orchestrate (the rest are declarations).

Handoffs and notifications go to the Writer, through the receiver's router
when one runs; ``notifications_wait`` parks its reply at the waiting
agent's router, which answers it when a notification for that agent
commits (or at the deadline). The wait therefore returns as soon as
something arrives, with no polling loop: it reads the store once before
waiting (nothing is lost between that read and the wait, because the
waiter is registered first) and once after each wake-up.
"""

from __future__ import annotations

import contextlib
import time
from typing import TYPE_CHECKING

from m3.actors import bridge
from m3.errors import NotFound, NotShared, Timeout
from m3.gateway.registry import acting
from m3.protocols.messages.coordination import (
    PollNotifications,
    ResolveMemories,
    SendHandoff,
    WaitNotifications,
)
from m3.protocols.messages.memory import MemoryFilter
from m3.protocols.tools import inbox as p
from m3.protocols.tools.inbox import (
    MemoryHandoffResult,
    Notification,
    NotificationsWaitResult,
)

if TYPE_CHECKING:
    from m3.gateway.service import CallContext, Service


async def shareable(svc: Service, sender: MemoryFilter, refs: list[str], audience: str | None) -> list[str]:
    """Full ids of ``refs`` as the ``sender`` filter sees them; with isolation on, each must be visible to ``audience``.

    ``audience`` None means every agent (task results). The check is the store's isolation clause.
    """
    if not refs:
        return []
    ids = await svc.ask(svc.system.directory, ResolveMemories(refs=tuple(refs), filter=sender))
    if svc.config["isolation.enforce"]:
        for memory_id in ids:
            try:
                await svc.ask(svc.system.directory, ResolveMemories(refs=(memory_id,), filter=MemoryFilter(
                    reader_agent_id=audience, enforce_isolation=True)))
            except NotFound:
                who = f"agent {audience!r}" if audience else "the other agents"
                raise NotShared(f"memory {memory_id} is private to its agent (scope=agent); {who} could not read it",
                                details={"memory_id": memory_id}) from None
    return ids


async def memory_handoff(svc: Service, a: p.MemoryHandoffArgs, ctx: CallContext) -> MemoryHandoffResult:
    sender = acting(ctx, a.from_agent)
    context = await shareable(svc, svc.read_filter(sender), a.context_ids, a.to_agent)
    return await bridge.ask(svc.system.routers, SendHandoff(
        from_agent=sender, to_agent=a.to_agent, task=a.task, note=a.note, task_id=a.task_id,
        context_ids=tuple(context)), svc.timeout)


async def _poll(svc: Service, agent: str, limit: int) -> list[Notification]:
    return (await svc.ask(svc.system.directory, PollNotifications(agent_id=agent, limit=limit))).items


async def notifications_wait(svc: Service, a: p.NotificationsWaitArgs, ctx: CallContext
                             ) -> NotificationsWaitResult:
    agent = acting(ctx, a.agent_id)
    deadline = time.monotonic() + a.timeout
    items = await _poll(svc, agent, a.limit)
    while not items:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return NotificationsWaitResult(count=0, items=[], timed_out=True)
        # Register first, then look: a notification committed in between wakes the waiter at once.
        woken = bridge.TrioReply()
        svc.system.routers.tell(WaitNotifications(agent_id=agent, deadline=deadline), woken)
        items = await _poll(svc, agent, a.limit)
        if items:
            break
        with contextlib.suppress(Timeout):
            await woken.wait(remaining)
        items = await _poll(svc, agent, a.limit)
    return NotificationsWaitResult(count=len(items), items=items, timed_out=False)
