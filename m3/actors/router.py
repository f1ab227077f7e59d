"""Inbox routers: one actor per agent, started by its first ``notifications_wait``, stopped when idle.

While it runs, a router passes handoffs and notifications for its agent to the Writer with the sender's
reply (in order; the answer still means "committed"; with no router they go straight to the Writer) and
holds its agent's waits. It answers them all when the Writer reports a commit that notified its agent,
and each at its deadline or when the router stops, so no caller waits unanswered. One timer per router
(earliest deadline or idle limit); retiring takes the lock every send takes, and only with an empty
mailbox, so nothing is sent to a router that is going away (docs/coordination.md, "Actors").
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from typing import Any

from m3.actors.base import EarliestTimer, Envelope, M3Actor, Reply
from m3.actors.supervisor import ActorHandle
from m3.errors import Unavailable
from m3.protocols.base import Message
from m3.protocols.messages.coordination import SendHandoff, SendNotification, WaitNotifications

log = logging.getLogger(__name__)


class NotificationsArrived(Message):
    """Told by the registry to a router after a commit that added notifications for its agent."""


class RouterTick(Message):
    """A router's own timer: drop expired waiters, stop when idle. ``due`` tells a timer that was replaced."""

    due: float

Retire = Callable[[Callable[[], bool]], bool]


class Router(M3Actor):
    def __init__(self, agent_id: str, *, writer: ActorHandle, idle_s: float, retire: Retire, **base: Any):
        super().__init__(**base)
        self.agent_id = agent_id
        self._writer = writer
        self._idle_s = max(0.01, idle_s)
        self._retire = retire
        self._waiters: list[tuple[Reply, float]] = []
        self._last_activity = time.monotonic()
        self._timer = EarliestTimer()

    def receive(self, env: Envelope) -> None:
        msg = env.message
        if isinstance(msg, RouterTick):
            self._on_tick(msg)
            return
        self._last_activity = time.monotonic()
        self.stats.handled += 1
        if isinstance(msg, SendHandoff | SendNotification):
            self._writer.tell(msg, env.reply)  # the Writer answers the sender after its commit
        elif isinstance(msg, WaitNotifications):
            assert env.reply is not None
            self._waiters.append((env.reply, msg.deadline))
            log.info("agent %s waits for notifications", self.agent_id)
        elif isinstance(msg, NotificationsArrived):
            self._wake(True)
        else:
            super().receive(env)
            return
        self._arm()

    # -- waiters -------------------------------------------------------------------------------

    def _wake(self, arrived: bool, by: float = math.inf) -> None:
        """Answer ``arrived`` to the waiters whose deadline is ``by`` or earlier (every one by default)."""
        due = [w for w in self._waiters if w[1] <= by]
        self._waiters = [w for w in self._waiters if w[1] > by]
        for reply, _deadline in due:
            reply.set_result(arrived)

    # -- the one timer -------------------------------------------------------------------------

    def _arm(self) -> None:
        """Make sure a timer fires by the earliest waiter deadline or the idle limit."""
        due = min([d for _, d in self._waiters] + [self._last_activity + self._idle_s])
        self._timer.arm(due, due - time.monotonic(), lambda: self.tell_self(RouterTick(due=due)))

    def _on_tick(self, tick: RouterTick) -> None:
        if tick.due != self._timer.due:
            return  # a timer that was replaced
        self._timer.cancel()
        now = time.monotonic()
        self._wake(False, by=now)
        idle = not self._waiters and now - self._last_activity >= self._idle_s
        if idle and self._retire(self.inbox_empty):
            return
        self._arm()

    def release(self) -> None:
        self._timer.cancel()
        # Callers re-check the store on False, so stopping (or crashing) never loses a wake-up.
        self._wake(False)


class RouterRegistry:
    """The running routers by agent; starts them on demand and retires them when idle."""

    def __init__(self, writer: ActorHandle, idle_s: float):
        self._writer = writer
        self._idle_s = idle_s
        self._lock = threading.Lock()
        self._routers: dict[str, ActorHandle] = {}
        self._stopping = False
        self.started = 0

    def tell(self, message: Message, reply: Reply | None = None) -> None:
        """Send a wait, handoff or notification to the router of the agent it is for.

        A wait starts the router if none runs (it needs one to park at). A handoff or notification goes through
        the receiver's router if one runs, else straight to the Writer: sending never starts a router, so
        that a caller naming agents that do not exist cannot start actors.
        """
        assert isinstance(message, WaitNotifications | SendHandoff | SendNotification)
        waits = isinstance(message, WaitNotifications)
        agent_id = message.agent_id if isinstance(message, WaitNotifications) else message.to_agent
        with self._lock:
            if self._refused(reply):
                return
            handle = self._routers.get(agent_id)
            if handle is None and waits:
                handle = self._start(agent_id)
            if handle is not None:
                handle.tell(message, reply)
                return
        self._writer.tell(message, reply)

    def _refused(self, reply: Reply | None) -> bool:
        if self._stopping and reply is not None:
            reply.set_exception(Unavailable("m3 is shutting down"))
        return self._stopping

    def _start(self, agent_id: str) -> ActorHandle:
        handle = ActorHandle(f"router:{agent_id}", Router, agent_id, writer=self._writer, idle_s=self._idle_s)
        handle.rebind(retire=lambda inbox_empty: self._retire(agent_id, handle, inbox_empty))
        self._routers[agent_id] = handle.start()
        self.started += 1
        return handle

    def arrived(self, agents: tuple[str, ...]) -> None:
        """Called by the Writer after a commit that notified ``agents``: wake the routers that run."""
        with self._lock:
            for agent_id in agents:
                handle = self._routers.get(agent_id)
                if handle is not None:
                    handle.tell(NotificationsArrived())

    def _retire(self, agent_id: str, handle: ActorHandle, inbox_empty: Callable[[], bool]) -> bool:
        """Remove an idle router; refused if it was replaced or a message is waiting for it."""
        with self._lock:
            if self._routers.get(agent_id) is not handle or not inbox_empty():
                return False
            del self._routers[agent_id]
        handle.stop(block=False)
        log.debug("stopped the idle router of %s", agent_id)
        return True

    def running(self) -> list[str]:
        with self._lock:
            return sorted(self._routers)

    def stop(self) -> None:
        with self._lock:
            self._stopping = True
            handles = list(self._routers.values())
            self._routers.clear()
        for handle in handles:
            handle.stop()

    def statistics(self) -> dict[str, Any]:
        with self._lock:
            return {"actor": "routers", "alive": not self._stopping, "running": len(self._routers),
                    "started": self.started}
