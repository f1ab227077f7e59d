"""Supervision: a stable handle per actor that restarts it with backoff (a timer, not a sleep).

Callers hold an :class:`ActorHandle`, never a raw actor reference. The messages still queued when the
actor crashed are re-delivered to the fresh one and those told meanwhile are buffered; a request whose
caller waits is never dropped silently: it is re-delivered or answered with an error.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar, overload

import pykka

from m3.actors.base import ActorStats, Envelope, M3Actor, Reply, ThreadReply, percentiles
from m3.errors import Unavailable
from m3.protocols.base import Message, Request

R = TypeVar("R")

log = logging.getLogger(__name__)

BACKOFF_FIRST_S = 0.05
BACKOFF_MAX_S = 5.0
#: A restart counts as "stable" (backoff resets) after running this long.
STABLE_AFTER_S = 30.0
#: Messages buffered while the actor is down; beyond this, callers get Unavailable.
MAX_BUFFERED = 100_000


class ActorHandle:
    """Start, address, restart and stop one actor."""

    def __init__(self, name: str, factory: type[M3Actor], *args: Any, **kwargs: Any):
        self.name = name
        self._factory = factory
        self._args = args
        self._kwargs = kwargs
        self.stats = ActorStats()
        self._lock = threading.Lock()
        self._ref: pykka.ActorRef[M3Actor] | None = None
        self._buffer: deque[Envelope] = deque()
        self._stopping = False
        self._backoff = BACKOFF_FIRST_S
        self._timer: threading.Timer | None = None

    def rebind(self, **kwargs: Any) -> None:
        """Replace constructor arguments before ``start`` (to wire actors that address each other)."""
        if self._ref is not None:
            raise RuntimeError(f"the {self.name} actor is already started")
        self._kwargs.update(kwargs)

    def _build(self) -> pykka.ActorRef[M3Actor]:
        """Construct and start the actor (pykka builds it in ``start``)."""
        return self._factory.start(*self._args, stats=self.stats, on_crash=self._crashed, **self._kwargs)

    def start(self) -> ActorHandle:
        with self._lock:
            self._ref = self._build()
        return self

    # -- sending -------------------------------------------------------------------------------

    def tell(self, message: Message, reply: Reply | None = None) -> None:
        """Queue ``message``; ``reply`` (if any) gets exactly one answer."""
        env = Envelope(message, reply)
        # Enqueue under the lock: a crash drains the inbox under the same lock, and stop() sets its
        # stopping flag under it, so no envelope can land in a dead actor's inbox unanswered.
        with self._lock:
            ref = self._ref
            if ref is not None and ref.is_alive():
                try:
                    ref.tell(env)
                    return
                except pykka.ActorDeadError:
                    pass
            self._buffer_or_refuse(env)

    @overload
    def ask(self, message: Request[R], timeout: float) -> R: ...
    @overload
    def ask(self, message: Message, timeout: float) -> Any: ...

    def ask(self, message: Message, timeout: float) -> Any:
        """Send and wait in this thread (typed ``R`` for a ``Request[R]``). Not for trio code: use
        ``m3.actors.bridge.ask``."""
        reply = ThreadReply()
        self.tell(message, reply)
        return reply.wait(timeout)

    def _buffer_or_refuse(self, env: Envelope) -> None:
        if self._stopping or len(self._buffer) >= MAX_BUFFERED:
            if env.reply is not None:
                env.reply.set_exception(Unavailable(f"the {self.name} actor is not running"))
            return
        self._buffer.append(env)

    # -- restarting ----------------------------------------------------------------------------

    def _crashed(self, drain: Callable[[], list[Envelope]]) -> None:
        """Called from the dying actor's thread; ``drain`` empties its inbox of unhandled envelopes."""
        with self._lock:
            self._buffer.extendleft(reversed(drain()))
            if self._stopping:
                self._fail_buffer()
                return
            ran_for = time.monotonic() - self.stats.started_at
            if ran_for > STABLE_AFTER_S:
                self._backoff = BACKOFF_FIRST_S
            delay = self._backoff
            self._backoff = min(self._backoff * 2, BACKOFF_MAX_S)
            self._timer = threading.Timer(delay, self._restart)
            self._timer.daemon = True
            self._timer.start()
        log.warning("restarting the %s actor in %.2f s", self.name, delay)

    def _restart(self) -> None:
        with self._lock:
            if self._stopping:
                self._fail_buffer()
                return
            self.stats.restarts += 1
            self.stats.started_at = time.monotonic()
            self._ref = self._build()
            self._deliver_buffer(self._ref)

    def _deliver_buffer(self, ref: pykka.ActorRef[M3Actor]) -> None:
        """Hand buffered envelopes to a fresh actor, under the lock so that they go before any told later.

        If the actor already died (its start failed), the rest stay buffered; its crash drains
        what it got back in front of them.
        """
        while self._buffer:
            try:
                ref.tell(self._buffer[0])
            except pykka.ActorDeadError:
                return
            self._buffer.popleft()

    def _fail_buffer(self) -> None:
        while self._buffer:
            env = self._buffer.popleft()
            if env.reply is not None:
                env.reply.set_exception(Unavailable(f"the {self.name} actor stopped"))

    # -- lifecycle -----------------------------------------------------------------------------

    def stop(self, timeout: float = 30.0, *, block: bool = True) -> None:
        """Stop after the messages already queued are handled.

        ``block=False`` only queues the stop (an actor may stop itself this way: it cannot wait for itself).
        """
        with self._lock:
            self._stopping = True
            if self._timer is not None:
                self._timer.cancel()
            ref = self._ref
            self._fail_buffer()
        if ref is not None and ref.is_alive():
            try:
                ref.stop(block=block, timeout=timeout)  # pykka waits only when blocking
            except (pykka.ActorDeadError, pykka.Timeout):
                log.warning("the %s actor did not stop within %.0f s", self.name, timeout)

    def wait_stopped(self, timeout: float) -> bool:
        """True once the actor has stopped (after a non-blocking stop); False if ``timeout`` passed first."""
        ref = self._ref
        return ref is None or ref.actor_stopped.wait(timeout)

    def statistics(self) -> dict[str, Any]:
        ref = self._ref
        alive = ref is not None and ref.is_alive()
        depth = ref.actor_inbox.qsize() if alive else len(self._buffer)  # type: ignore[union-attr]
        return {
            "actor": self.name, "alive": alive, "queue_depth": int(depth),
            "handled": self.stats.handled, "failed": self.stats.failed, "restarts": self.stats.restarts,
            "latency": percentiles(self.stats.latencies),
        }
