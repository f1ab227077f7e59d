"""Handlers of the diagnostics tools: the store's status through the Searcher, the actors, the settings."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from m3.embed.factory import configured_model
from m3.errors import M3Error
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


async def diagnostics_health(svc: Service, a: NoArgs, ctx: CallContext) -> p.DiagnosticsHealthResult:
    checks = [*await _store_checks(svc), _actors_check(svc), _engine_check(svc)]
    worst = max((c.status for c in checks), key=("ok", "warn", "fail").index)
    return p.DiagnosticsHealthResult(status=worst, checks=checks)


async def _store_checks(svc: Service) -> list[p.HealthCheck]:
    """store, schema and embedding_backlog, from one StoreStatus of the Searcher (a failure: the store is down)."""
    model = configured_model(svc.config)
    try:
        facts = await svc.ask(svc.system.searcher, StoreStatus(model=model))
    except M3Error as exc:
        return [p.HealthCheck(check="store", status="fail", message=f"the store does not answer: {exc.message}")]
    revision = facts["revision"] or None
    waiting = int(facts["description"]["counts"]["without_vector"])
    return [
        p.HealthCheck(check="store", status="ok", message=f"the {where_of(svc.config)['backend']} store answers"),
        p.HealthCheck(check="schema", status="ok" if revision == HEAD else "fail",
                      message=f"schema revision {revision} (this m3's newest: {HEAD})"),
        p.HealthCheck(check="embedding_backlog", status="ok" if waiting == 0 else "warn",
                      message=f"{waiting} current memories wait for a vector of {model}"),
    ]


def _actors_check(svc: Service) -> p.HealthCheck:
    rows = [r for r in svc.system.statistics() if r["actor"] != "routers"]
    dead = [r["actor"] for r in rows if not r["alive"]]
    restarted = [r["actor"] for r in rows if r.get("restarts")]
    if dead:
        return p.HealthCheck(check="actors", status="fail", message=f"not alive: {', '.join(dead)}")
    if restarted:
        return p.HealthCheck(check="actors", status="warn", message=f"restarted since start: {', '.join(restarted)} "
                                                                    "(see diagnostics_actor_stats and the log)")
    return p.HealthCheck(check="actors", status="ok", message=f"all {len(rows)} actors alive, none restarted")


def _engine_check(svc: Service) -> p.HealthCheck:
    if svc.engine_status is None:
        return p.HealthCheck(check="engine", status="ok", message=f"embedded in process {os.getpid()} (no engine)")
    state = svc.engine_status()
    return p.HealthCheck(check="engine", status="ok", message=f"engine pid {state['pid']}, m3 {state['version']}, "
                                                              f"up {state['uptime_s']:.0f} s")


async def diagnostics_slow_calls(svc: Service, a: p.SlowCallsArgs, ctx: CallContext
                                 ) -> p.DiagnosticsSlowCallsResult:
    considered, slowest = svc.calls.slowest(a.limit, a.tool)
    return p.DiagnosticsSlowCallsResult(considered=considered, calls=[
        p.SlowCall(tool=c.tool, ms=c.ms, at=c.at, outcome=c.outcome) for c in slowest])
