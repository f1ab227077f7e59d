"""The trio ↔ actor bridge: send a message, await the answer without blocking trio.

The actor thread wakes the asking task through its trio token (``run_sync_soon(event.set)``); the task
awaits the event under a deadline. No pykka future is awaited and no thread is parked for the caller.
"""

from __future__ import annotations

import contextlib
from typing import Any, TypeVar, overload

import trio

from m3.actors.base import Answer, Mailbox
from m3.protocols.base import Message, Request

R = TypeVar("R")


class TrioReply(Answer):
    """A reply that wakes one trio task. Create it inside the trio run that awaits it."""

    def __init__(self) -> None:
        super().__init__()
        self._token = trio.lowlevel.current_trio_token()
        self._event = trio.Event()

    def _wake(self) -> None:
        # If the asker's run is over, nobody is waiting any more.
        with contextlib.suppress(trio.RunFinishedError):
            self._token.run_sync_soon(self._event.set)

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
