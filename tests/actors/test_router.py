"""Inbox routers: one actor per agent, started on demand, answering held waits, stopping when idle."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest

from m3.actors.base import ThreadReply
from m3.actors.router import RouterRegistry
from m3.actors.supervisor import ActorHandle
from m3.errors import Unavailable
from m3.protocols.messages.coordination import RegisterAgent, SendNotification, WaitNotifications

WAIT_S = 10.0


@pytest.fixture
def routers(start_writer: Callable[..., ActorHandle]) -> Iterator[Callable[[float], RouterRegistry]]:
    """A registry over a real Writer that wakes it after commits, with agents a and b registered."""
    made: list[RouterRegistry] = []

    def make(idle_s: float) -> RouterRegistry:
        holder: list[RouterRegistry] = []

        def wake(agents: tuple[str, ...]) -> None:  # the registry is built after the Writer it wakes from
            holder[0].arrived(agents)

        writer = start_writer(on_notified=wake)
        registry = RouterRegistry(writer, idle_s=idle_s)
        holder.append(registry)
        for agent in ("a", "b"):
            writer.ask(RegisterAgent(agent_id=agent), WAIT_S)
        made.append(registry)
        return registry

    yield make
    for registry in made:
        registry.stop()


def send(registry: RouterRegistry, to: str, text: str = "hello") -> dict[str, object]:
    reply = ThreadReply()
    registry.tell(SendNotification(from_agent="a", to_agent=to, message=text), reply)
    result: dict[str, object] = reply.wait(WAIT_S)
    return result


def wait_for(registry: RouterRegistry, agent: str, within_s: float) -> ThreadReply:
    reply = ThreadReply()
    registry.tell(WaitNotifications(agent_id=agent, deadline=time.monotonic() + within_s), reply)
    return reply


def test_a_router_starts_with_the_first_wait_of_its_agent_and_stops_once_idle(
        routers: Callable[[float], RouterRegistry]) -> None:
    registry = routers(0.2)
    send(registry, "b")
    assert registry.running() == []  # sending needs no router: it goes straight to the Writer
    assert wait_for(registry, "b", 0.01).wait(WAIT_S) is False
    assert registry.running() == ["b"]
    handle = registry._routers.get("b")
    assert handle is not None
    assert handle.wait_stopped(WAIT_S)
    assert registry.running() == []
    wait_for(registry, "b", 0.01)  # and starts again on demand
    assert registry.running() == ["b"]


def test_a_held_wait_is_answered_as_soon_as_a_notification_for_its_agent_commits(
        routers: Callable[[float], RouterRegistry]) -> None:
    registry = routers(60)
    waiting_b = wait_for(registry, "b", WAIT_S * 3)
    waiting_a = wait_for(registry, "a", 0.3)
    send(registry, "b")
    assert waiting_b.wait(WAIT_S) is True  # long before its own deadline
    assert waiting_a.wait(WAIT_S) is False  # nothing for a: answered at its deadline, not woken


def test_a_router_holding_a_wait_is_not_stopped_while_the_wait_lasts(
        routers: Callable[[float], RouterRegistry]) -> None:
    registry = routers(0.05)
    waiting = wait_for(registry, "b", 0.5)
    handle = registry._routers.get("b")
    assert handle is not None
    assert not handle.wait_stopped(0.25)  # idle time passed twice over, but a caller is waiting
    assert waiting.wait(WAIT_S) is False
    assert handle.wait_stopped(WAIT_S)


def test_messages_racing_with_idle_stops_are_all_delivered(routers: Callable[[float], RouterRegistry]) -> None:
    registry = routers(0.001)  # a router may retire between any two messages
    outcomes = []
    for i in range(150):
        wait_for(registry, "b", 0.001)  # (re)starts the router, which retires soon after
        outcomes.append(send(registry, "b", f"n{i}"))
        if i % 10 == 9:  # now and then let it retire for sure, so the run sees many starts and stops
            handle = registry._routers.get("b")
            assert handle is None or handle.wait_stopped(WAIT_S)
    assert len({o.id for o in outcomes}) == 150
    assert registry.statistics()["started"] >= 15


def test_stopping_answers_held_waits_and_refuses_new_messages(routers: Callable[[float], RouterRegistry]) -> None:
    registry = routers(60)
    waiting = wait_for(registry, "b", WAIT_S * 3)
    registry.stop()
    assert waiting.wait(WAIT_S) is False
    with pytest.raises(Unavailable):
        send(registry, "b")
