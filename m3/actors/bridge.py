"""The trio ↔ actor bridge: send a message, await the answer without blocking trio.

The actor thread wakes the asking task through its trio token (``run_sync_soon``); the task awaits the event
under a deadline. No pykka future is awaited and no thread is parked for the caller. The answers an actor gives
in one go (a group commit's) wake their run once: each ``run_sync_soon`` writes to the run's wake-up socket, a
system call per answer otherwise (:class:`_Wakeups`).
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, TypeVar, overload

import trio

from m3.actors.base import Answer, Mailbox
from m3.protocols.base import Message, Request

R = TypeVar("R")


class _Wakeups:
    """The events of one trio run to set, from any thread: the first of a burst schedules one call in the run
    that sets every event added until it runs."""

    def __init__(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        self._lock = threading.Lock()
        self._events: list[trio.Event] = []

    def add(self, event: trio.Event) -> None:
        with self._lock:
            self._events.append(event)
            first = len(self._events) == 1
        if first:
            # If the run is over, nobody is waiting any more.
            with contextlib.suppress(trio.RunFinishedError):
                self._token.run_sync_soon(self._set_all)

    def _set_all(self) -> None:
        with self._lock:
            events, self._events = self._events, []
        for event in events:
            event.set()


_WAKEUPS: trio.lowlevel.RunVar[_Wakeups] = trio.lowlevel.RunVar("m3_wakeups")


def _run_wakeups() -> _Wakeups:
    """This trio run's :class:`_Wakeups` (made on first use)."""
    try:
        return _WAKEUPS.get()
    except LookupError:
        wakeups = _Wakeups()
        _WAKEUPS.set(wakeups)
        return wakeups


class TrioReply(Answer):
    """A reply that wakes one trio task. Create it inside the trio run that awaits it."""

    def __init__(self) -> None:
        super().__init__()
        self._wakeups = _run_wakeups()
        self._event = trio.Event()

    def _wake(self) -> None:
        self._wakeups.add(self._event)

    async def wait(self, timeout: float) -> Any:
        with trio.move_on_after(timeout):
            await self._event.wait()
        return self._taken(self._event.is_set(), timeout)


@overload
async def ask(handle: Mailbox, message: Request[R], timeout: float) -> R: ...
@overload
async def ask(handle: Mailbox, message: Message, timeout: float) -> Any: ...


async def ask(handle: Mailbox, message: Message, timeout: float) -> Any:
    """Send ``message`` to ``handle`` and await its answer (typed ``R`` for a ``Request[R]``)."""
    reply = TrioReply()
    handle.tell(message, reply)
    return await reply.wait(timeout)
