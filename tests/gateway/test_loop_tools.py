"""The loop domain through the real service on both stores: status, run-once, pause and resume (kept across a
restart of the actor system), the one-shot process that never ticks, and the command line over the engine."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from m3.actors.loop import LoopTick
from m3.actors.system import ActorSystem
from m3.config import Config
from m3.embed.minilm import MiniLMEmbedder
from m3.errors import M3Error
from m3.gateway.registry import default_registry
from m3.gateway.service import CallContext, Service
from m3.protocols.messages.memory import Flush
from tests.actors.loop_passes import HandTicker, TallyPass
from tests.gateway.outcomes import Run

pytestmark = pytest.mark.anyio

LOCAL = CallContext(agent_id="agent-a")
WAIT_S = 30.0
NUMBERS = itertools.count()

Start = Callable[..., tuple[Service, TallyPass, HandTicker]]


@pytest.fixture
def start(config: Config, embedder: MiniLMEmbedder) -> Iterator[Start]:
    """Start a service whose observer runs a TallyPass on a hand ticker, its governor off (this machine's load is
    the other tests'; the governor has tests of its own)."""
    started: list[ActorSystem] = []
    config = config.with_overrides(loop__governor__max_load=0, loop__governor__max_writes_per_s=0)

    def run(*, background: bool = True) -> tuple[Service, TallyPass, HandTicker]:
        tally, ticker = TallyPass(), HandTicker()
        system = ActorSystem(config, embedder, background=background, loop_passes=(tally,),
                             loop_tickers={"observer": ticker, "reflector": HandTicker()}).start()
        started.append(system)
        return Service(config, system, default_registry()), tally, ticker

    yield run
    for system in started:
        system.stop()


async def call(svc: Service, tool: str, ctx: CallContext = LOCAL, **args: Any) -> dict[str, Any]:
    done: dict[str, Any] = await svc.call(tool, args, ctx)
    return done


async def notes(svc: Service, count: int) -> None:
    for _ in range(count):
        await call(svc, "memory_write", content=f"loop tool note {next(NUMBERS)}", type="note", scope="org")


def by_name(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {one["name"]: one for one in status["passes"]}


async def test_status_lists_every_pass_with_its_switch_and_the_governors_verdict(start: Start) -> None:
    svc, _, _ = start()
    status = await call(svc, "loop_status")
    passes = by_name(status)
    assert [one["name"] for one in status["passes"]] == ["observe", "reflect", "decay", "rollup", "tally"]
    assert (passes["observe"]["enabled"], passes["observe"]["registered"]) == (True, False)
    assert passes["rollup"]["enabled"] is False  # opt-in
    assert (passes["tally"]["registered"], passes["tally"]["actor"], passes["tally"]["runs"]) == (True, "observer", 0)
    assert status["background"] is True and status["interval_s"] == svc.config["loop.interval_s"]
    assert set(status["governor"]) == {"run", "reason", "writes_per_s", "load", "max_writes_per_s", "max_load"}


async def test_run_once_steps_now_and_returns_that_runs_statistics(start: Start) -> None:
    svc, _, _ = start()
    await notes(svc, 3)
    done = await call(svc, "loop_run_once")
    assert done["count"] == 1
    assert {k: done["runs"][0][k] for k in ("name", "ran", "seen", "produced", "error")} == {
        "name": "tally", "ran": True, "seen": 3, "produced": 1, "error": None}
    assert (await call(svc, "loop_run_once", **{"pass": "decay"}))["count"] == 0  # known, not in this m3
    named = await call(svc, "loop_run_once", **{"pass": "tally"})
    assert (named["runs"][0]["seen"], named["runs"][0]["produced"]) == (0, 0)
    shown = by_name(await call(svc, "loop_status"))["tally"]
    assert (shown["runs"], shown["seen"], shown["produced"], shown["watermark"]["seq"] > 0) == (2, 3, 1, True)
    with pytest.raises(M3Error) as refused:
        await call(svc, "loop_run_once", **{"pass": "nothing"})
    assert refused.value.code == "invalid_argument" and "tally" in refused.value.hint


async def test_a_pause_is_kept_in_the_store_so_a_restarted_system_keeps_it(start: Start) -> None:
    svc, _, _ = start()
    paused = await call(svc, "loop_pause", **{"pass": "tally"})
    assert paused == {"paused": True, "passes": ["tally"]}
    svc.system.stop()
    again, tally, ticker = start()
    assert by_name(await call(again, "loop_status"))["tally"]["paused"] is True
    await notes(again, 1)
    skipped = await call(again, "loop_run_once")
    assert (skipped["runs"][0]["ran"], skipped["runs"][0]["skipped"]) == (False, "paused")
    assert ticker.armed.wait(WAIT_S)
    ticker.fire()
    assert ticker.armed.wait(WAIT_S)
    assert tally.steps == [] and by_name(await call(again, "loop_status"))["tally"]["deferred"] == 0
    every = await call(again, "loop_resume")
    assert every["passes"] == ["observe", "reflect", "decay", "rollup", "tally"]
    assert not any(one["paused"] for one in (await call(again, "loop_status"))["passes"])
    ticker.fire()
    assert ticker.armed.wait(WAIT_S)
    assert [seen for seen, _, _ in tally.steps] == [1]


async def test_a_one_shot_process_never_ticks_but_runs_the_loop_when_asked(start: Start) -> None:
    svc, tally, ticker = start(background=False)
    await notes(svc, 1)
    svc.system.observer.tell(LoopTick())
    svc.system.observer.ask(Flush(), WAIT_S)
    assert tally.steps == [] and not ticker.armed.is_set()
    assert (await call(svc, "loop_status"))["background"] is False
    assert (await call(svc, "loop_run_once"))["runs"][0]["seen"] == 1


async def test_a_caller_bound_by_a_token_may_read_the_status_but_not_steer_the_loop(start: Start) -> None:
    svc, _, _ = start()
    bound = CallContext(agent_id="agent-a", bound=True)
    assert (await call(svc, "loop_status", bound))["passes"]
    for tool in ("loop_pause", "loop_resume", "loop_run_once"):
        with pytest.raises(M3Error) as refused:
            await call(svc, tool, bound)
        assert refused.value.code == "forbidden"


def test_the_command_line_shows_the_status_and_runs_the_loop_through_the_engine(m3: Run) -> None:
    status = m3("loop", "status")
    assert status.status == 0, status.stderr
    shown = status.document()
    assert shown["background"] is True  # the engine started for the call holds the store's background work
    assert [one["name"] for one in shown["passes"]] == ["observe", "reflect", "decay", "rollup"]
    ran = m3("loop", "run-once")
    assert ran.status == 0, ran.stderr
    done = ran.document()  # the registry's passes that are on by default (the roll-up is opt-in), on an empty store
    assert [(one["name"], one["ran"], one["seen"]) for one in done["runs"]] == [
        ("observe", True, 0), ("reflect", True, 0), ("decay", True, 0)]
    assert m3("loop", "pause", "--pass", "decay").document() == {"paused": True, "passes": ["decay"]}
    assert {one["name"]: one["paused"] for one in m3("loop", "status").document()["passes"]}["decay"] is True
    wrong = m3("loop", "run-once", "--pass", "nothing")
    assert wrong.error()["code"] == "invalid_argument"
