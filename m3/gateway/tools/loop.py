"""Handlers of the ``loop`` tools: the cognitive loop's two actors (observer, reflector) and its ``loop_state``.

Pause and resume go to the Writer (``loop_state``), which both actors read at each step, so no actor needs
telling and a restarted engine keeps them. Steering the loop acts on the whole store: a caller bound by a token
may read the status but not pause, resume or run the loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from m3.actors import bridge
from m3.actors.supervisor import ActorHandle
from m3.cognition.passes import PASS_NAMES
from m3.cognition.registry import switched_on
from m3.errors import Forbidden, InvalidArgument
from m3.protocols.messages import loop as lp
from m3.protocols.tools import loop as p
from m3.protocols.tools.meta import NoArgs

if TYPE_CHECKING:
    from m3.gateway.service import CallContext, Service


def local_only(tool: str, ctx: CallContext) -> None:
    """Refuse a caller bound by a token: steering the loop acts on the whole store, beyond any one agent."""
    if ctx.bound:
        raise Forbidden(f"{tool} steers the cognitive loop of the whole store: only the local user may call it, "
                        "not an agent bound by a token",
                        hint=f"Run `m3 loop {tool.removeprefix('loop_').replace('_', '-')}` on the machine of the "
                             "store; loop_status is open to every caller.", details={"agent_id": ctx.agent_id})


def _actors(svc: Service) -> tuple[ActorHandle, ActorHandle]:
    return svc.system.observer, svc.system.reflector


async def _statuses(svc: Service) -> list[lp.LoopActorStatus]:
    return [await bridge.ask(handle, lp.LoopStatusOf(), svc.timeout) for handle in _actors(svc)]


async def _chosen(svc: Service, name: str | None) -> tuple[list[str], dict[str, str]]:
    """The passes a call names (``name``, or every pass) and the actor running each one that runs here."""
    running = {one.name: st.actor for st in await _statuses(svc) for one in st.passes}
    known = list(dict.fromkeys([*PASS_NAMES, *running]))
    if name is None:
        return known, running
    if name not in known:
        raise InvalidArgument(f"no loop pass is called {name!r}", hint=f"Name one of {', '.join(known)}.",
                              details={"pass": name, "passes": known})
    return [name], running


async def loop_status(svc: Service, a: NoArgs, ctx: CallContext) -> p.LoopStatusResult:
    statuses = await _statuses(svc)
    running = {one.name: (one, st.interval_s) for st in statuses for one in st.passes}
    others = tuple(name for name in PASS_NAMES if name not in running)
    rows = await bridge.ask(svc.system.observer, lp.PassStates(names=others), svc.timeout) if others else {}
    interval, config = svc.config["loop.interval_s"], svc.config
    shown = [p.LoopPassStatus(enabled=True, registered=True, interval_s=every, **one.model_dump())
             for one, every in running.values()]
    for name in others:
        row: dict[str, Any] = rows.get(name) or {}
        updated = row.get("updated_at")
        shown.append(p.LoopPassStatus(
            name=name, enabled=switched_on(config, name), registered=False, actor=None,
            paused=bool(row.get("paused", False)), interval_s=interval, last_run=None,
            watermark=row.get("watermark"), state_updated_at=updated.isoformat() if updated is not None else None,
            runs=0, seen=0, produced=0, llm_calls=0, seconds=0.0, failed=0, deferred=0, last_error=None,
            last_deferred=None))
    order = {name: i for i, name in enumerate(PASS_NAMES)}
    shown.sort(key=lambda one: (order.get(one.name, len(order)), one.name))
    verdict = statuses[0].governor
    return p.LoopStatusResult(
        enabled=config["loop.enabled"], background=any(st.background for st in statuses), interval_s=interval,
        budget=config["loop.budget"], passes=shown,
        governor=p.LoopGovernorStatus(**verdict.model_dump(),
                                      max_writes_per_s=config["loop.governor.max_writes_per_s"],
                                      max_load=config["loop.governor.max_load"]))


async def loop_run_once(svc: Service, a: Any, ctx: CallContext) -> p.LoopRunOnceResult:
    local_only("loop_run_once", ctx)
    name = p.pass_of(a)
    _, running = await _chosen(svc, name)
    runs: list[lp.PassRun] = []
    for handle in _actors(svc):
        if name is None or running.get(name) == handle.name:
            # A step may read a whole budget and call a model: the same bound as any admin request.
            runs += await bridge.ask(handle, lp.RunPassesOnce(name=name), max(svc.timeout, 3600.0))
    return p.LoopRunOnceResult(count=len(runs), runs=[p.LoopRun(**run.model_dump()) for run in runs])


async def _set_paused(svc: Service, a: Any, ctx: CallContext, paused: bool, tool: str) -> p.LoopPauseResult:
    local_only(tool, ctx)
    names, _ = await _chosen(svc, p.pass_of(a))
    await bridge.ask(svc.system.writer, lp.SetPassesPaused(names=tuple(names), paused=paused), svc.timeout)
    return p.LoopPauseResult(paused=paused, passes=names)


async def loop_pause(svc: Service, a: Any, ctx: CallContext) -> p.LoopPauseResult:
    return await _set_paused(svc, a, ctx, True, "loop_pause")


async def loop_resume(svc: Service, a: Any, ctx: CallContext) -> p.LoopPauseResult:
    return await _set_paused(svc, a, ctx, False, "loop_resume")
