"""The engine's ``/mcp``: the MCP SDK's server, built on the first request that needs it.

Importing the SDK (its protocol types, two eras of them, are some hundreds of pydantic models) and building the
server took about 1.7 s of the engine's 3.3 s start, timed inside it on this machine (docs/benchmarks.md, "Engine
start", for the CLI's view), and most engines never serve MCP over their socket: the CLI and the stdio
front-ends call the tool routes (``/v1/tools/{name}``), and the stdio relay speaks MCP itself. Only a client of
the socket's ``/mcp``, or ``m3 serve`` relaying a remote client, needs the SDK, and that first request waits for
it once (the import runs on a worker thread, so the event loop keeps serving the tool routes meanwhile).

:class:`LazyMcp` is an ASGI endpoint and the app's lifespan: the lifespan holds the task group in which the
SDK's session manager runs once started, and cancels it at shutdown, as the SDK's own app does with its
lifespan.
"""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
from anyio.abc import TaskGroup, TaskStatus
from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from m3.errors import EngineUnavailable

#: Builds the SDK's session manager (after the SDK is imported): what serves the requests.
Build = Callable[[], Any]


class LazyMcp:
    """``/mcp`` whose server is built and started on first use; also the lifespan that runs it."""

    def __init__(self, build: Build, *, sdk_module: str = "m3.gateway.mcp_server"):
        """``build`` makes the session manager (``server.streamable_http_app(...)`` then its ``session_manager``);
        ``sdk_module`` is imported on a worker thread first, so that ``build`` itself is quick."""
        self._build = build
        self._sdk_module = sdk_module
        self._manager: Any = None
        self._lock = anyio.Lock()
        self._group: TaskGroup | None = None

    @property
    def started(self) -> bool:
        """Whether the MCP server has been built (a request reached ``/mcp``)."""
        return self._manager is not None

    @asynccontextmanager
    async def lifespan(self, _app: Any) -> AsyncIterator[None]:
        async with anyio.create_task_group() as group:
            self._group = group
            try:
                yield
            finally:
                self._group = None
                group.cancel_scope.cancel()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        manager = self._manager if self._manager is not None else await self._start()
        if manager is None:
            stopping = EngineUnavailable("the engine is stopping", hint="Call again: a new engine starts.")
            await JSONResponse({"error": stopping.to_dict()}, status_code=stopping.http_status)(scope, receive, send)
            return
        await manager.handle_request(scope, receive, send)

    async def _start(self) -> Any:
        async with self._lock:
            if self._manager is None and self._group is not None:
                await anyio.to_thread.run_sync(importlib.import_module, self._sdk_module)
                manager = self._build()
                await self._group.start(self._run, manager)
                self._manager = manager
        return self._manager

    @staticmethod
    async def _run(manager: Any, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        async with manager.run():
            task_status.started()
            await anyio.sleep_forever()
