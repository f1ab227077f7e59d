"""The trio bridge: many tasks await actors concurrently; a late answer becomes m3.errors.Timeout."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
import trio

from m3.actors import bridge
from m3.actors.supervisor import ActorHandle
from m3.errors import InvalidArgument, Timeout
from tests.actors.probes import Block, Echo, Fail, Probe, ProbeActor

WAIT_S = 10.0


@pytest.fixture
def probe() -> Probe:
    return Probe()


@pytest.fixture
def handle(probe: Probe) -> Iterator[ActorHandle]:
    h = ActorHandle("probe", ProbeActor, probe=probe).start()
    yield h
    probe.gate.set()
    h.stop(timeout=WAIT_S)


def test_two_hundred_trio_tasks_asking_at_once_each_get_their_own_answer(handle: ActorHandle) -> None:
    answers: dict[int, int] = {}

    async def one(i: int) -> None:
        answers[i] = await bridge.ask(handle, Echo(value=i), WAIT_S)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            for i in range(200):
                nursery.start_soon(one, i)

    trio.run(main)
    assert answers == {i: i for i in range(200)}


def test_an_actor_error_is_raised_in_the_asking_task(handle: ActorHandle) -> None:
    with pytest.raises(InvalidArgument, match="on purpose"):
        trio.run(bridge.ask, handle, Fail(), WAIT_S)


def test_no_answer_in_time_raises_timeout_and_the_late_answer_harms_nobody(
        handle: ActorHandle, probe: Probe) -> None:
    with pytest.raises(Timeout):
        trio.run(bridge.ask, handle, Block(), 0.05)
    probe.gate.set()  # the actor now answers a trio run that has finished
    assert handle.ask(Echo(value=3), WAIT_S) == 3
    assert handle.statistics()["restarts"] == 0


def test_a_task_waiting_on_a_busy_actor_does_not_hold_up_tasks_asking_another(handle: ActorHandle) -> None:
    busy_probe = Probe()
    busy = ActorHandle("busy", ProbeActor, probe=busy_probe).start()
    finished: list[str] = []

    async def main() -> None:
        async def slow() -> None:
            assert await bridge.ask(busy, Block(), WAIT_S) is True
            finished.append("slow")

        async def fast(i: int) -> None:
            assert await bridge.ask(handle, Echo(value=i), WAIT_S) == i
            finished.append("fast")
            if finished.count("fast") == 5:
                busy_probe.gate.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(slow)
            for i in range(5):
                nursery.start_soon(fast, i)

    try:
        trio.run(main)
    finally:
        busy_probe.gate.set()
        busy.stop(timeout=WAIT_S)
    assert finished == ["fast"] * 5 + ["slow"]


def test_trio_stays_responsive_while_an_actor_is_busy(handle: ActorHandle, probe: Probe) -> None:
    ticks = 0

    async def main() -> None:
        nonlocal ticks

        async def ask() -> None:
            assert await bridge.ask(handle, Block(), WAIT_S) is True

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask)
            assert await trio.to_thread.run_sync(probe.blocked.wait, WAIT_S)
            for _ in range(100):  # the loop runs while the actor holds the request
                ticks += 1
                await trio.lowlevel.checkpoint()
            probe.gate.set()

    trio.run(main)
    assert ticks == 100


def test_answers_given_together_wake_their_trio_run_once_and_each_waiter_gets_its_own() -> None:
    calls: list[object] = []
    answers: dict[int, int] = {}

    async def main() -> None:
        replies = [bridge.TrioReply() for _ in range(50)]
        wakeups = bridge._run_wakeups()
        token = wakeups._token

        class Counting:
            def run_sync_soon(self, fn: object, *args: object) -> None:
                calls.append(fn)
                token.run_sync_soon(fn, *args)  # type: ignore[arg-type]

        wakeups._token = Counting()  # type: ignore[assignment]

        def answer_all() -> None:  # an actor answering a group commit, from its own thread
            for i, reply in enumerate(replies):
                reply.set_result(i)

        # The run cannot handle the first wake-up before the last answer is given (its thread is held here).
        answer_all_thread = threading.Thread(target=answer_all)
        answer_all_thread.start()
        answer_all_thread.join(WAIT_S)

        async def take(i: int) -> None:
            answers[i] = await replies[i].wait(WAIT_S)

        async with trio.open_nursery() as nursery:
            for i in range(50):
                nursery.start_soon(take, i)
        assert len(calls) == 1
        # A later answer wakes the run again.
        late = bridge.TrioReply()
        late.set_result(99)
        assert await late.wait(WAIT_S) == 99
        assert len(calls) == 2

    trio.run(main)
    assert answers == {i: i for i in range(50)}
