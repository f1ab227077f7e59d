"""Supervision: crashes restart the actor with backoff; no waiting caller is ever left without an answer."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from m3.actors.base import ThreadReply
from m3.actors.supervisor import BACKOFF_FIRST_S, ActorHandle
from m3.errors import InvalidArgument, Unavailable
from tests.actors.probes import Block, Boom, Echo, Fail, Probe, ProbeActor

WAIT_S = 10.0


@pytest.fixture(autouse=True)
def _quiet_expected_crash_logs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.CRITICAL, logger="pykka")
    caplog.set_level(logging.CRITICAL, logger="m3.actors")


@pytest.fixture
def probe() -> Probe:
    return Probe()


@pytest.fixture
def handle(probe: Probe) -> Iterator[ActorHandle]:
    h = ActorHandle("probe", ProbeActor, probe=probe).start()
    yield h
    probe.gate.set()
    probe.release_gate.set()
    h.stop(timeout=WAIT_S)


def ask_later(handle: ActorHandle, value: int) -> ThreadReply:
    reply = ThreadReply()
    handle.tell(Echo(value=value), reply)
    return reply


def test_a_failing_request_answers_its_caller_with_the_error_and_the_actor_carries_on(handle: ActorHandle) -> None:
    with pytest.raises(InvalidArgument, match="on purpose"):
        handle.ask(Fail(), WAIT_S)
    with pytest.raises(RuntimeError, match="on purpose"):
        handle.ask(Fail(coded=False), WAIT_S)
    assert handle.ask(Echo(value=7), WAIT_S) == 7
    stats = handle.statistics()
    assert (stats["failed"], stats["handled"], stats["restarts"]) == (2, 1, 0)


def test_a_crash_on_an_event_restarts_the_actor_and_answers_the_requests_queued_behind_it(
        handle: ActorHandle, probe: Probe) -> None:
    handle.tell(Block())  # keeps the actor busy while requests queue up
    assert probe.blocked.wait(WAIT_S)
    handle.tell(Boom())
    replies = [ask_later(handle, i) for i in range(5)]
    probe.gate.set()
    assert [r.wait(WAIT_S) for r in replies] == list(range(5))
    stats = handle.statistics()
    assert stats["restarts"] == 1
    assert stats["alive"]
    assert len(probe.starts) == 2


def test_repeated_crashes_wait_longer_before_each_restart(handle: ActorHandle, probe: Probe) -> None:
    for i in range(3):
        handle.tell(Boom())
        assert handle.ask(Echo(value=i), WAIT_S) == i  # buffered during the backoff, answered after it
    assert handle.statistics()["restarts"] == 3
    delays = [start - crash for crash, start in zip(probe.crashes, probe.starts[1:], strict=True)]
    for n, delay in enumerate(delays):
        assert delay >= BACKOFF_FIRST_S * 2 ** n


def test_a_request_sent_while_a_crashed_actor_releases_its_resources_is_answered(
        handle: ActorHandle, probe: Probe) -> None:
    probe.hold_next_release = True
    handle.tell(Boom())
    assert probe.releasing.wait(WAIT_S)
    reply = ask_later(handle, 1)
    probe.release_gate.set()
    assert reply.wait(WAIT_S) == 1


def test_an_actor_that_also_fails_to_release_its_resources_is_still_restarted(
        handle: ActorHandle, probe: Probe) -> None:
    handle.tell(Block())
    assert probe.blocked.wait(WAIT_S)
    probe.break_next_release = True
    handle.tell(Boom())
    reply = ask_later(handle, 4)
    probe.gate.set()
    assert reply.wait(WAIT_S) == 4
    assert handle.statistics()["restarts"] == 1


def test_a_request_sent_while_a_failed_start_releases_its_resources_is_answered(probe: Probe) -> None:
    probe.setup_failures = 1
    probe.hold_next_release = True
    handle = ActorHandle("probe", ProbeActor, probe=probe).start()
    try:
        assert probe.releasing.wait(WAIT_S)
        reply = ask_later(handle, 1)
        probe.release_gate.set()
        assert reply.wait(WAIT_S) == 1
        assert handle.statistics()["restarts"] == 1
    finally:
        handle.stop(timeout=WAIT_S)


def test_an_actor_whose_start_keeps_failing_is_retried_until_it_starts(probe: Probe) -> None:
    probe.setup_failures = 3
    handle = ActorHandle("probe", ProbeActor, probe=probe).start()
    try:
        assert handle.ask(Echo(value=5), WAIT_S) == 5
        assert handle.statistics()["restarts"] == 3
    finally:
        handle.stop(timeout=WAIT_S)


def test_a_stopped_actor_refuses_new_requests_with_unavailable(handle: ActorHandle) -> None:
    handle.stop(timeout=WAIT_S)
    with pytest.raises(Unavailable):
        handle.ask(Echo(value=1), WAIT_S)
    assert not handle.statistics()["alive"]


def test_stop_answers_the_requests_already_queued(handle: ActorHandle, probe: Probe) -> None:
    handle.tell(Block())
    assert probe.blocked.wait(WAIT_S)
    replies = [ask_later(handle, i) for i in range(3)]
    probe.gate.set()
    handle.stop(timeout=WAIT_S)
    assert [r.wait(WAIT_S) for r in replies] == [0, 1, 2]
