"""One agent's calls of m3 tools on an in-process ``Service``, for the framework integrations.

The service's calls are trio coroutines (the actor bridge wakes trio tasks). Frameworks call from plain
threads (LangChain, CrewAI) or from asyncio (LangGraph's ``abatch``, PydanticAI), so each sync call is one
short ``trio.run`` in the calling thread, and each async call runs that in a worker thread of whatever
event loop awaits it (anyio: asyncio or trio). A call's errors are m3's coded :class:`~m3.errors.M3Error`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import anyio.to_thread
import trio

from m3.config import Config
from m3.gateway.runtime import running
from m3.gateway.service import CallContext, Service


@dataclass(frozen=True)
class M3Client:
    """Calls m3 tools as ``agent_id`` (and ``user_id``): the identity its writes are owned by.

    Sync methods must not be called from inside a trio run of the same thread (use the async ones there).
    """

    service: Service
    agent_id: str
    user_id: str | None = None

    @property
    def context(self) -> CallContext:
        return CallContext(agent_id=self.agent_id, user_id=self.user_id)

    def call(self, name: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
        """Run tool ``name`` with JSON ``args``; its JSON result. Raises M3Error only."""
        return trio.run(self.service.call, name, args or {}, self.context)

    async def acall(self, name: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
        """:meth:`call` without blocking the awaiting event loop (asyncio or trio)."""
        return await anyio.to_thread.run_sync(self.call, name, args)

    def as_agent(self, agent_id: str, user_id: str | None = None) -> M3Client:
        """The same service seen as another agent (a CrewAI agent's role, for instance)."""
        return replace(self, agent_id=agent_id, user_id=user_id if user_id is not None else self.user_id)


@contextmanager
def embedded(agent_id: str, config: Config | None = None, user_id: str | None = None) -> Iterator[M3Client]:
    """A started in-process m3 (``config``, or the one m3_config.toml and M3_* give) seen as ``agent_id``.

    On exit pending embeddings are finished and the actors stopped. While it runs no engine is involved:
    this process owns the actors (another process on the same SQLite file is still safe: its writes use
    ``BEGIN IMMEDIATE``).
    """
    with running(config) as service:
        yield M3Client(service, agent_id, user_id)
