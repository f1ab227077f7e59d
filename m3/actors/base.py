"""Actor plumbing: envelopes with reply handles, a dispatching base actor, statistics.

Every message travels in an :class:`Envelope` with an optional :class:`Reply`, which the actor answers
once and which wakes its waiter; nobody blocks on a pykka future. An exception while handling a request
goes back to the caller and the actor carries on; while handling an event (no caller) it crashes the
actor, and its :class:`~m3.actors.supervisor.ActorHandle` restarts it with backoff and re-delivers the
messages still queued.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

import pykka

from m3.errors import M3Error, Timeout
from m3.protocols.base import Message
from m3.protocols.messages.memory import Flush

log = logging.getLogger(__name__)


class Reply(Protocol):
    """Where an actor sends the answer to one request. Called once, from the actor's thread."""

    def set_result(self, value: Any) -> None: ...

    def set_exception(self, exc: BaseException) -> None: ...


class Mailbox(Protocol):
    """Where a message can be sent: an actor's handle, or the inbox routers (which pick the agent's router)."""

    def tell(self, message: Message, reply: Reply | None = None) -> None: ...


class Answer:
    """A :class:`Reply` that keeps the answer until its waiter, woken by ``_wake``, takes it."""

    def __init__(self) -> None:
        self._value: Any = None
        self._exc: BaseException | None = None

    def set_result(self, value: Any) -> None:
        self._value = value
        self._wake()

    def set_exception(self, exc: BaseException) -> None:
        self._exc = exc
        self._wake()

    def _wake(self) -> None:
        raise NotImplementedError

    def _taken(self, answered: bool, timeout: float) -> Any:
        """The value, or the exception raised; :class:`Timeout` if no answer came within ``timeout``."""
        if not answered:
            raise Timeout(f"no answer within {timeout:g} s")
        if self._exc is not None:
            raise self._exc
        return self._value


class ThreadReply(Answer):
    """A reply a plain thread can wait for (CLI helpers, benchmarks, actor-to-actor asks)."""

    def __init__(self) -> None:
        super().__init__()
        self._done = threading.Event()

    def _wake(self) -> None:
        self._done.set()

    def wait(self, timeout: float) -> Any:
        return self._taken(self._done.wait(timeout), timeout)


class EarliestTimer:
    """An actor's one timer: fires by the earliest time it is armed for (``due``, on any clock)."""

    def __init__(self) -> None:
        self._timer: threading.Timer | None = None
        self.due: Any = None

    def arm(self, due: Any, delay_s: float, fire: Callable[[], None]) -> None:
        """Run ``fire`` in ``delay_s`` (from a timer thread), unless the timer fires by ``due`` already."""
        if self._timer is not None and self.due <= due:
            return
        self.cancel()
        self._timer = threading.Timer(max(0.0, delay_s), fire)
        self._timer.daemon = True
        self.due = due
        self._timer.start()

    def cancel(self) -> None:
        """Disarm (also: note that it fired)."""
        if self._timer is not None:
            self._timer.cancel()
        self._timer, self.due = None, None


@dataclass(frozen=True)
class Envelope:
    message: Message
    reply: Reply | None = None


#: How many recent handling times each actor keeps for its latency percentiles.
LATENCIES_KEPT = 1024


@dataclass
class ActorStats:
    """Counters written only by the actor's own thread; others only read them.

    ``latencies`` holds the handling times (seconds) of the last :data:`LATENCIES_KEPT` messages: a bounded
    window, so keeping it costs one append per message and percentiles describe recent behaviour.
    """

    handled: int = 0
    failed: int = 0
    restarts: int = 0
    started_at: float = field(default_factory=time.monotonic)
    latencies: deque[float] = field(default_factory=lambda: deque(maxlen=LATENCIES_KEPT))

    def took(self, seconds: float) -> None:
        """Record one message's handling time (from the actor's thread)."""
        self.latencies.append(seconds)


def percentiles(samples: Iterable[float] | None) -> dict[str, float | int | None]:
    """``{samples, p50_ms, p95_ms, p99_ms}`` of handling times in seconds (nearest rank; None without any).

    Safe to call from any thread: it copies the window first (a deque copy is atomic under the GIL).
    """
    values = sorted(list(samples or ()))
    if not values:
        return {"samples": 0, "p50_ms": None, "p95_ms": None, "p99_ms": None}

    def at(q: float) -> float:
        return round(values[min(len(values) - 1, int(q * len(values)))] * 1000, 3)

    return {"samples": len(values), "p50_ms": at(0.50), "p95_ms": at(0.95), "p99_ms": at(0.99)}


class M3Actor(pykka.ThreadingActor):
    """Base actor: dispatches envelopes by message type to ``handlers()`` (message class -> a method taking
    the message and returning the reply value). Every actor answers :class:`Flush` with True."""

    # Daemon threads: a caller that dies without stop() must not hang the process.
    # Committed work is safe regardless; uncommitted work was never acknowledged.
    use_daemon_thread = True

    def __init__(self, stats: ActorStats, on_crash: Callable[[Callable[[], list[Envelope]]], None]):
        super().__init__()
        self.stats = stats
        self._on_crash = on_crash
        self._dispatch: dict[type[Message], Callable[[Any], Any]] = {}

    def handlers(self) -> dict[type[Message], Callable[[Any], Any]]:
        return {}

    def on_start(self) -> None:
        try:
            self.setup()
            self._dispatch = {Flush: lambda _msg: True, **self.handlers()}
        except Exception as exc:
            # pykka does not call on_failure for on_start errors; do it so the handle restarts us.
            self.on_failure(type(exc), exc, exc.__traceback__)
            raise

    def setup(self) -> None:
        """Open what the actor owns; runs in the actor's thread before any message."""

    def on_receive(self, message: Envelope) -> None:  # every tell (ActorHandle, tell_self) sends an Envelope
        self.receive(message)

    def receive(self, env: Envelope) -> None:
        """Handle one envelope; overridden by actors that defer replies (the Writer)."""
        begun = time.perf_counter()
        try:
            result = self.handle(env.message)
        except Exception as exc:
            self.stats.took(time.perf_counter() - begun)
            self.stats.failed += 1
            if env.reply is None:
                raise  # no caller: crash, the supervisor restarts us
            if not isinstance(exc, M3Error):
                log.exception("%s failed on %s", type(self).__name__, type(env.message).__name__)
            env.reply.set_exception(exc)
            return
        self.stats.took(time.perf_counter() - begun)
        self.stats.handled += 1
        if env.reply is not None:
            env.reply.set_result(result)

    def handle(self, message: Message) -> Any:
        handler = self._dispatch.get(type(message))
        if handler is None:
            raise TypeError(f"{type(self).__name__} cannot handle {type(message).__name__}")
        return handler(message)

    def inbox_empty(self) -> bool:
        return bool(self.actor_inbox.empty())

    def tell_self(self, message: Message) -> None:
        """Queue ``message`` for this actor, from any thread (its timers); dropped once the actor is gone."""
        with contextlib.suppress(pykka.ActorDeadError):
            self.actor_ref.tell(Envelope(message))

    def on_failure(self, exception_type: Any, exception_value: Any, traceback: Any) -> None:
        log.error("%s crashed: %r", type(self).__name__, exception_value)
        # Dead from here on, so the handle buffers new messages. pykka has set this already after a
        # failed receive, but after a failed on_start only once on_failure returns: a message put in
        # the inbox meanwhile would be dropped without an answer.
        self.actor_stopped.set()
        try:
            self.release()
        except Exception:  # a failed clean-up must not also cost the restart
            log.exception("%s could not release its resources", type(self).__name__)
        # The handle drains the inbox under its lock, so no message can slip in after the drain.
        self._on_crash(self._drain_inbox)

    def _drain_inbox(self) -> list[Envelope]:
        """The envelopes still queued, in order; the inbox is left empty."""
        leftover: list[Envelope] = []
        while not self.actor_inbox.empty():
            item = self.actor_inbox.get_nowait()  # type: ignore[attr-defined]  # a queue.Queue at run time
            inner = getattr(item, "message", None)
            if isinstance(inner, Envelope):
                leftover.append(inner)
        return leftover

    def on_stop(self) -> None:
        self.release()

    def release(self) -> None:
        """Close what the actor owns (connections). Must be safe to call twice."""
