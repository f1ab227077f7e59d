"""How the dashboard calls m3's tools: every read and every change is an ordinary tool call made as one named
agent (``dashboard.agent``, default ``dashboard``), so it is validated, isolated and recorded in history and the
read audit like any other agent's call.

Two callers with one interface: :class:`ServiceCaller` on an in-process ``Service`` (embedded mode, Python
applications, the tests) and :class:`EngineCaller`, which relays each call to the store's engine over its socket
as the CLI does (the default).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import trio

from m3.config import Config
from m3.errors import M3Error, all_error_classes

if TYPE_CHECKING:  # imported when used: with the engine, this process needs neither pydantic nor the actors
    from m3.gateway.service import Service


class CallFailed(Exception):
    """A tool answered with an error: ``error`` is its ``{code, message, hint}`` document."""

    def __init__(self, error: dict[str, Any], status: int = 400):
        super().__init__(error.get("message", "the call failed"))
        self.error = error
        self.status = status

    def as_error(self) -> M3Error:
        """The m3 error of the same code (a plain M3Error when the code is not one of this version's)."""
        classes = {cls.code: cls for cls in all_error_classes()}
        cls = classes.get(str(self.error.get("code")), M3Error)
        return cls(str(self.error.get("message")), hint=self.error.get("hint"), details=self.error.get("details"))


class Caller(Protocol):
    agent: str

    async def __call__(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        """The tool's JSON result; :class:`CallFailed` with its error document otherwise."""
        ...


class ServiceCaller:
    def __init__(self, service: Service, agent: str, user: str | None = None):
        from m3.gateway.service import CallContext

        self.service = service
        self.agent = agent
        self.ctx = CallContext(agent_id=agent, user_id=user)

    async def __call__(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        try:
            return await self.service.call(name, args, self.ctx)
        except M3Error as exc:
            raise CallFailed(exc.to_dict(), exc.http_status) from None


class EngineCaller:
    """Calls relayed to the store's engine (started on first use), one thread per call (the relay blocks)."""

    def __init__(self, config: Config, agent: str, user: str | None = None):
        from m3.gateway.engine import client
        from m3.gateway.engine.paths import engine_paths, settings_fingerprint

        self.config = config
        self.agent = agent
        self.paths = engine_paths(config)
        self.headers = client.identity_headers(agent, user or "", settings_fingerprint(config))

    async def __call__(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        from m3.gateway.engine.calls import relay

        try:
            status, body = await trio.to_thread.run_sync(
                lambda: relay(self.config, name, args, headers=self.headers, paths=self.paths))
        except M3Error as exc:
            raise CallFailed(exc.to_dict(), 503) from None
        if isinstance(body, dict) and set(body) == {"error"}:
            raise CallFailed(body["error"], status)
        if not isinstance(body, dict):
            raise CallFailed({"code": "internal_error", "message": f"{name} answered {body!r}"}, 502)
        return body
