"""The loop actor on both stores with a real Writer: hand-fired ticks, the budget and more-work steps, pause,
failing passes, the governor and the background lease. No test sleeps: ticks are fired by the test."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import select

from m3.actors.loop import LoopActor, LoopTick, TakeBackground
from m3.actors.supervisor import ActorHandle
from m3.cognition.passes import LoopPass
from m3.errors import M3Error
from m3.protocols.messages.loop import (
    CommitPass,
    LoopActorStatus,
    LoopStatusOf,
    MoveWatermark,
    PassStates,
    RunPassesOnce,
    SetPassesPaused,
)
from m3.protocols.messages.memory import Flush, NewMemory, WriteMemories
from m3.store.engine import StoreOptions, open_engine
from m3.store.schema import memories as m
from tests.actors.conftest import WAIT_S, write_one
from tests.actors.loop_passes import BrokenPass, HandTicker, RefusedPass, TallyPass

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


class Probes:
    """The governor's probes, moved by the test: the Writer's count, the load per core and monotonic time."""

    def __init__(self) -> None:
        self.writes, self.load, self.now = 0, 0.0, 1000.0


@pytest.fixture
def start_loop(store_options: StoreOptions) -> Iterator[Callable[..., ActorHandle]]:
    started: list[ActorHandle] = []

    def start(writer: ActorHandle, passes: Sequence[LoopPass], ticker: HandTicker, *, background: bool = True,
              budget: int = 10, probes: Probes | None = None) -> ActorHandle:
        seen = probes or Probes()
        handle = ActorHandle("observer", LoopActor, store_options, actor="observer", passes=tuple(passes),
                             writer=writer, interval_s=60.0, budget=budget, background=background,
                             ask_timeout=WAIT_S, max_writes_per_s=50.0, max_load=0.9,
                             writes=lambda: seen.writes, load=lambda: seen.load, monotonic=lambda: seen.now,
                             ticker=ticker, clock=lambda: T0).start()
        started.append(handle)
        return handle

    yield start
    for handle in started:
        handle.stop(timeout=WAIT_S)


def status(loop: ActorHandle) -> dict[str, Any]:
    found: LoopActorStatus = loop.ask(LoopStatusOf(), WAIT_S)
    return {one.name: one for one in found.passes}


def summaries(options: StoreOptions) -> list[str]:
    engine = open_engine(options, "reader")
    try:
        with engine.connect() as conn:
            return list(conn.execute(select(m.c.content).where(m.c.type == "summary").order_by(m.c.seq)).scalars())
    finally:
        engine.dispose()


def watermark(loop: ActorHandle, name: str) -> Any:
    return loop.ask(PassStates(names=(name,)), WAIT_S).get(name, {}).get("watermark")


NUMBERS = itertools.count()


def notes(writer: ActorHandle, count: int) -> None:
    """Write ``count`` new notes (each text new: an identical current memory would not be written again)."""
    for _ in range(count):
        writer.ask(write_one(f"note number {next(NUMBERS)}", scope="org"), WAIT_S)


def test_a_hand_fired_tick_steps_the_pass_commits_its_writes_with_its_watermark_and_arms_the_next(
        start_writer: Callable[..., ActorHandle], start_loop: Callable[..., ActorHandle],
        store_options: StoreOptions) -> None:
    writer, ticker, tally = start_writer(), HandTicker(), TallyPass()
    loop = start_loop(writer, [tally], ticker)
    assert ticker.armed.wait(WAIT_S)  # armed at start; nothing runs before the first tick
    notes(writer, 3)
    loop.ask(Flush(), WAIT_S)
    assert tally.steps == [] and summaries(store_options) == []
    ticker.fire()
    assert ticker.armed.wait(WAIT_S)
    assert summaries(store_options) == [summaries(store_options)[0]] and summaries(store_options)[0].startswith(
        "tally: 3 notes")
    assert tally.steps == [(3, T0, 10)]  # ctx.now is the injected clock, ctx.budget loop.budget
    done = status(loop)["tally"]
    assert (done.runs, done.seen, done.produced, done.failed, done.last_run) == (1, 3, 1, 0, T0.isoformat())
    assert watermark(loop, "tally")["seq"] > 0
    ticker.fire()  # nothing new: a step that sees nothing writes nothing
    assert ticker.armed.wait(WAIT_S)
    assert len(summaries(store_options)) == 1 and status(loop)["tally"].runs == 2


def test_the_budget_bounds_each_step_and_more_work_is_stepped_again_before_the_next_interval(
        start_writer: Callable[..., ActorHandle], start_loop: Callable[..., ActorHandle],
        store_options: StoreOptions) -> None:
    writer, ticker, tally = start_writer(), HandTicker(), TallyPass()
    loop = start_loop(writer, [tally], ticker, budget=2)
    assert ticker.armed.wait(WAIT_S)
    notes(writer, 5)
    ticker.fire()
    assert ticker.armed.wait(WAIT_S)  # armed again only once the backlog was done
    assert [seen for seen, _, _ in tally.steps] == [2, 2, 1]
    assert [text.split(" up to")[0] for text in summaries(store_options)] == ["tally: 2 notes"] * 2 + ["tally: 1 notes"]
    done = status(loop)["tally"]
    assert (done.runs, done.seen, done.produced) == (3, 5, 3)


def test_a_failing_pass_is_counted_and_retried_at_the_next_tick_while_the_others_go_on(
        start_writer: Callable[..., ActorHandle], start_loop: Callable[..., ActorHandle],
        store_options: StoreOptions) -> None:
    writer, ticker, broken, tally = start_writer(), HandTicker(), BrokenPass(), TallyPass()
    loop = start_loop(writer, [broken, tally], ticker)
    assert ticker.armed.wait(WAIT_S)
    notes(writer, 1)
    ticker.fire()
    assert ticker.armed.wait(WAIT_S)
    failed = status(loop)
    assert failed["broken"].failed == 1 and "the broken pass broke" in failed["broken"].last_error
    assert failed["tally"].produced == 1 and len(summaries(store_options)) == 1
    broken.failing.clear()
    ticker.fire()
    assert ticker.armed.wait(WAIT_S)
    healed = status(loop)["broken"]
    assert (broken.steps, healed.runs, healed.failed, healed.last_error) == (2, 2, 1, None)


def test_a_write_the_writer_refuses_leaves_nothing_of_the_step(
        start_writer: Callable[..., ActorHandle], start_loop: Callable[..., ActorHandle],
        store_options: StoreOptions) -> None:
    writer, ticker = start_writer(), HandTicker()
    loop = start_loop(writer, [RefusedPass()], ticker)
    [run] = loop.ask(RunPassesOnce(), WAIT_S)
    assert run.error is not None and run.error.startswith("not_found:")
    assert summaries(store_options) == [] and watermark(loop, "refused") is None
    assert status(loop)["refused"].failed == 1


def test_a_paused_pass_does_not_step_until_resumed(
        start_writer: Callable[..., ActorHandle], start_loop: Callable[..., ActorHandle]) -> None:
    writer, ticker, tally = start_writer(), HandTicker(), TallyPass()
    loop = start_loop(writer, [tally], ticker)
    assert ticker.armed.wait(WAIT_S)
    notes(writer, 1)
    writer.ask(SetPassesPaused(names=("tally",), paused=True), WAIT_S)
    ticker.fire()
    assert ticker.armed.wait(WAIT_S)
    assert tally.steps == [] and status(loop)["tally"].paused
    [skipped] = loop.ask(RunPassesOnce(), WAIT_S)
    assert (skipped.ran, skipped.skipped) == (False, "paused")
    [named] = loop.ask(RunPassesOnce(name="tally"), WAIT_S)  # named, a paused pass runs once
    assert (named.ran, named.seen) == (True, 1)
    writer.ask(SetPassesPaused(names=("tally",), paused=False), WAIT_S)
    notes(writer, 1)
    ticker.fire()
    assert ticker.armed.wait(WAIT_S)
    assert [seen for seen, _, _ in tally.steps] == [1, 1] and not status(loop)["tally"].paused


def test_the_governor_defers_ticks_under_a_write_burst_and_under_load_but_run_once_runs(
        start_writer: Callable[..., ActorHandle], start_loop: Callable[..., ActorHandle]) -> None:
    writer, ticker, tally, probes = start_writer(), HandTicker(), TallyPass(), Probes()
    loop = start_loop(writer, [tally], ticker, probes=probes)
    assert ticker.armed.wait(WAIT_S)
    notes(writer, 1)
    probes.writes, probes.now = 1000, probes.now + 10.0  # 100 requests/s, over 50
    ticker.fire()
    assert ticker.armed.wait(WAIT_S)
    burst = status(loop)["tally"]
    assert tally.steps == [] and burst.deferred == 1 and "writing 100.0 requests/s" in burst.last_deferred
    probes.now, probes.load = probes.now + 10.0, 1.5  # writes stopped, but the machine is busy
    ticker.fire()
    assert ticker.armed.wait(WAIT_S)
    busy = status(loop)["tally"]
    assert tally.steps == [] and busy.deferred == 2 and "busy: load 1.50 per core" in busy.last_deferred
    [run] = loop.ask(RunPassesOnce(), WAIT_S)  # on demand, whatever the governor says
    assert (run.ran, run.seen, run.produced) == (True, 1, 1)
    probes.now, probes.load = probes.now + 10.0, 0.2
    notes(writer, 1)
    ticker.fire()
    assert ticker.armed.wait(WAIT_S)
    assert [seen for seen, _, _ in tally.steps] == [1, 1]


def test_without_the_background_lease_ticks_do_nothing_until_it_is_taken(
        start_writer: Callable[..., ActorHandle], start_loop: Callable[..., ActorHandle]) -> None:
    writer, ticker, tally = start_writer(), HandTicker(), TallyPass()
    loop = start_loop(writer, [tally], ticker, background=False)
    notes(writer, 1)
    loop.tell(LoopTick())
    loop.ask(Flush(), WAIT_S)
    assert tally.steps == [] and not ticker.armed.is_set()
    assert not loop.ask(LoopStatusOf(), WAIT_S).background
    loop.ask(TakeBackground(), WAIT_S)
    assert ticker.armed.wait(WAIT_S)
    ticker.fire()
    assert ticker.armed.wait(WAIT_S)
    assert [seen for seen, _, _ in tally.steps] == [1]


def test_a_commit_holding_a_request_the_writer_does_not_commit_is_refused_whole(
        start_writer: Callable[..., ActorHandle], store_options: StoreOptions) -> None:
    writer = start_writer()
    summary = WriteMemories(memories=(NewMemory(type="summary", scope="org", content="never"),), actor="loop:t")
    for odd in (Flush(), CommitPass(name="inner", writes=(summary,))):
        with pytest.raises(M3Error) as refused:
            writer.ask(CommitPass(name="tally", writes=(summary, odd)), WAIT_S)
        assert refused.value.code == "invalid_argument"
    assert summaries(store_options) == []
    done = writer.ask(CommitPass(name="tally", writes=(summary, MoveWatermark(name="tally", watermark={"n": 1}))),
                      WAIT_S)
    assert done[0][0].created and done[1] is None and summaries(store_options) == ["never"]
