"""Who an engine request acts as, and the gate every request passes: version and settings checks, bearer tokens,
and the count of calls in flight (the engine's idle clock)."""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from m3 import __version__
from m3.config import Config
from m3.errors import EngineSettingsMismatch, EngineVersionMismatch, Unauthorized
from m3.gateway.engine.client import AGENT_HEADER, SETTINGS_HEADER, USER_HEADER, VERSION_HEADER
from m3.gateway.service import CallContext, Service

if TYPE_CHECKING:
    from m3.gateway.engine.server import EngineState

#: The engine's own routes (status, stats, stop, flush): neither tool calls nor activity.
ENGINE_PREFIX = "/v1/engine/"

IDENTITY_SCOPE_KEY = "m3.identity"


class Gate:
    """Counts requests in flight (the idle clock), refuses those of another m3 version, and checks bearer tokens.

    A request with ``Authorization: Bearer`` (relayed by ``m3 serve``) acts as its token's agent, bound to it
    (``scope["m3.identity"]``); an invalid token is 401. Without one, the headers of a local front-end say who.
    """

    def __init__(self, app: ASGIApp, state: EngineState, service: Service):
        self.app = app
        self.state = state
        self.service = service
        self._verifier: Any = None
        self.user = service.config["identity.user_id"] or None

    @property
    def verifier(self) -> Any:
        """The store's bearer-token check, made for the first request with a token (it imports the MCP SDK,
        which an engine serving local front-ends never needs: :mod:`m3.gateway.engine.mcp_endpoint`)."""
        if self._verifier is None:
            from m3.gateway.http_server import StoreTokenVerifier

            self._verifier = StoreTokenVerifier(self.service)
        return self._verifier

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope["path"].startswith(ENGINE_PREFIX):  # status, stats, stop: neither calls nor activity
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        theirs = headers.get(VERSION_HEADER.lower())
        settings = headers.get(SETTINGS_HEADER.lower())
        if theirs == __version__ and settings is not None and settings != self.state.settings:
            other = EngineSettingsMismatch(
                "the engine runs with other settings than this front-end's",
                details={"busy": self.state.inflight, "pid": os.getpid()})
            await JSONResponse({"error": other.to_dict()}, status_code=other.http_status)(scope, receive, send)
            return
        if theirs is not None and theirs != __version__:
            error = EngineVersionMismatch(
                f"the engine runs m3 {__version__} and this front-end is m3 {theirs}",
                details={"engine_version": __version__, "frontend_version": theirs,
                         "busy": self.state.inflight, "pid": os.getpid()})
            await JSONResponse({"error": error.to_dict()}, status_code=error.http_status)(scope, receive, send)
            return
        authorization = headers.get("authorization")
        if authorization is not None:
            scheme, _, token = authorization.partition(" ")
            access = await self.verifier.verify_token(token.strip()) if scheme.lower() == "bearer" else None
            if access is None:
                unauthorized = Unauthorized("this route needs a valid bearer token")
                await JSONResponse({"error": unauthorized.to_dict()}, status_code=401,
                                   headers={"WWW-Authenticate": 'Bearer realm="m3"'})(scope, receive, send)
                return
            scope[IDENTITY_SCOPE_KEY] = CallContext(agent_id=access.client_id, user_id=self.user, bound=True)
        state = self.state
        state.inflight += 1
        state.requests += 1
        try:
            await self.app(scope, receive, send)
        finally:
            state.inflight -= 1
            state.last_activity = time.monotonic()


def header_identity(config: Config) -> Any:
    """Who a request acts as: its ``X-M3-Agent``/``X-M3-User`` headers, else the engine's configured identity."""
    default_agent = config["identity.agent_id"] or None
    default_user = config["identity.user_id"] or None

    def of_headers(headers: Any, scope: Any = None) -> CallContext:
        bound: CallContext | None = (scope or {}).get(IDENTITY_SCOPE_KEY)
        if bound is not None:
            return bound
        agent = headers.get(AGENT_HEADER, None)
        user = headers.get(USER_HEADER, None)
        return CallContext(agent_id=(agent or None) if agent is not None else default_agent,
                           user_id=(user or None) if user is not None else default_user)

    return of_headers
