"""The handlers of the coordination domains that orchestrate: ``notifications_wait`` and ``agent_whoami`` (the
rest are declarations).

``notifications_wait`` parks its reply at the waiting
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
from m3.errors import NotFound, Timeout
from m3.gateway.registry import acting
from m3.protocols.messages.coordination import GetAgent, PollNotifications, WaitNotifications
from m3.protocols.tools import inbox as p
from m3.protocols.tools.inbox import Notification, NotificationsWaitResult
from m3.protocols.tools.meta import NoArgs
from m3.protocols.tools.whoami import AgentWhoamiResult

if TYPE_CHECKING:
    from m3.gateway.service import CallContext, Service


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


async def agent_whoami(svc: Service, a: NoArgs, ctx: CallContext) -> AgentWhoamiResult:
    registered = None
    if ctx.agent_id:
        with contextlib.suppress(NotFound):
            registered = await svc.ask(svc.system.directory, GetAgent(id=ctx.agent_id))
    return AgentWhoamiResult(agent_id=ctx.agent_id, user_id=ctx.user_id, bound=ctx.bound,
                             isolation=svc.config["isolation.enforce"], registered=registered)
