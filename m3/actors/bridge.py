"""The trio ↔ actor bridge: send a message, await the answer without blocking trio.

The reply object remembers the trio token of the task that asked. The actor
thread stores the answer and schedules ``event.set`` on the trio loop with
``run_sync_soon``; the task awaits the event under a deadline. No pykka
future is ever awaited and no thread is parked for the caller.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, TypeVar, overload

import trio

from m3.actors.supervisor import ActorHandle
from m3.errors import Timeout
from m3.protocols.base import Message, Request

R = TypeVar("R")


class TrioReply:
    """A reply that wakes one trio task. Create it inside the trio run that awaits it."""

    def __init__(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        self._event = trio.Event()
        self._value: Any = None
        self._exc: BaseException | None = None

    def set_result(self, value: Any) -> None:
        self._value = value
        self._wake()

    def set_exception(self, exc: BaseException) -> None:
        self._exc = exc
        self._wake()

    def _wake(self) -> None:
        # If the asker's run is over, nobody is waiting any more.
        with contextlib.suppress(trio.RunFinishedError):
            self._token.run_sync_soon(self._event.set)

    async def wait(self, timeout: float) -> Any:
        with trio.move_on_after(timeout):
            await self._event.wait()
        if not self._event.is_set():
            raise Timeout(f"no answer within {timeout:g} s")
        if self._exc is not None:
            raise self._exc
        return self._value


@overload
async def ask(handle: ActorHandle, message: Request[R], timeout: float) -> R: ...
@overload
async def ask(handle: ActorHandle, message: Message, timeout: float) -> Any: ...


async def ask(handle: ActorHandle, message: Message, timeout: float) -> Any:
    """Send ``message`` to the actor behind ``handle`` and await its answer (typed ``R`` for a ``Request[R]``)."""
    reply = TrioReply()
    handle.tell(message, reply)
    return await reply.wait(timeout)


async def ask_via(send: Callable[[TrioReply], None], timeout: float) -> Any:
    """Like :func:`ask`, for senders that are not one handle (``send`` queues the message with the reply)."""
    reply = TrioReply()
    send(reply)
    return await reply.wait(timeout)
