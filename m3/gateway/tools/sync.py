"""Handlers of the ``sync`` tools: they ask the store's Sync actor (docs/sync.md).

A sync acts on the whole store (it pushes every agent's rows), so a caller bound by a token may read the status
and the log but not run a sync.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from m3.actors import bridge
from m3.errors import Forbidden
from m3.protocols.messages import sync as sy
from m3.protocols.tools import sync as p
from m3.protocols.tools.meta import NoArgs

if TYPE_CHECKING:
    from m3.gateway.service import CallContext, Service

#: Longest a sync may run for the caller waiting on it (a first sync of a large store takes minutes).
SYNC_ASK_TIMEOUT_S = 3600.0


async def sync_now(svc: Service, a: NoArgs, ctx: CallContext) -> p.SyncNowResult:
    if ctx.bound:
        raise Forbidden("sync_now pushes and pulls the whole store: only the local user may run it, not an agent "
                        "bound by a token", hint="Run `m3 sync now` on the machine of the store; sync_status and "
                                                 "sync_log are open to every caller.",
                        details={"agent_id": ctx.agent_id})
    report = await bridge.ask(svc.system.sync, sy.RunSync(trigger="manual"), max(svc.timeout, SYNC_ASK_TIMEOUT_S))
    return p.SyncNowResult(**report)


async def sync_status(svc: Service, a: NoArgs, ctx: CallContext) -> p.SyncStatusResult:
    return p.SyncStatusResult(**await bridge.ask(svc.system.sync, sy.SyncStatusOf(), svc.timeout))


async def sync_log(svc: Service, a: p.SyncLogArgs, ctx: CallContext) -> p.SyncLogResult:
    return p.SyncLogResult(**await bridge.ask(svc.system.sync, sy.SyncLogOf(limit=a.limit), svc.timeout))
