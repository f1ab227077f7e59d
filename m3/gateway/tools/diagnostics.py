"""Handlers of the diagnostics tools: the store's status through the Searcher, the actors, the settings."""

from __future__ import annotations

from typing import TYPE_CHECKING

from m3.embed.factory import configured_model
from m3.gateway.store_commands import isolation_of, where_of
from m3.protocols.messages.memory import StoreStatus
from m3.protocols.tools import diagnostics as p
from m3.protocols.tools.meta import NoArgs
from m3.store.migrations import HEAD

if TYPE_CHECKING:
    from m3.gateway.service import CallContext, Service


async def diagnostics_store_status(svc: Service, a: NoArgs, ctx: CallContext) -> p.DiagnosticsStoreStatusResult:
    # The Searcher owns a read connection to the store; the gateway opens none of its own.
    facts = await svc.ask(svc.system.searcher, StoreStatus(model=configured_model(svc.config)))
    revision = facts["revision"] or None
    return p.DiagnosticsStoreStatusResult(
        **where_of(svc.config), isolation=isolation_of(svc.config), revision=revision, head=HEAD,
        current=revision == HEAD, **facts["description"],
    )


async def diagnostics_actor_stats(svc: Service, a: NoArgs, ctx: CallContext) -> p.DiagnosticsActorStatsResult:
    return p.DiagnosticsActorStatsResult(actors=[p.ActorStats(**row) for row in svc.system.statistics()])


async def diagnostics_config(svc: Service, a: NoArgs, ctx: CallContext) -> p.DiagnosticsConfigResult:
    # Config.rows shows a secret setting that is set as "<set, hidden>", never its value.
    return p.DiagnosticsConfigResult(settings=[p.SettingRow(**row) for row in svc.config.rows()])
