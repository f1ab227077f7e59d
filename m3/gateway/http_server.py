"""``m3 serve``: remote MCP (Streamable HTTP) and the tool routes on trio (hypercorn), behind bearer tokens.

Every request needs ``Authorization: Bearer <token>``: a missing, unknown or
revoked token is HTTP 401 before any MCP handling. A valid token acts as
its agent (``CallContext.bound``): tools default ``agent_id`` to it and
refuse an ``agent_id`` naming another agent, so an agent cannot write or
read as another. Tokens are looked up by their SHA-256 in the store on
every request, so a revocation holds from the next request on.

POST responses are JSON rather than SSE (``json_response``): the SDK's
client leaves SSE generators unclosed on trio, and a tool call has one
answer anyway; ``tools/list_changed`` still reaches clients on their
notification streams.

The same tokens guard the tool routes (``POST /v1/tools/{name}``, see
:mod:`m3.gateway.rest`). Every request body is bounded in size and time
(:class:`~m3.gateway.http_guard.BodyGuard`); idle keep-alive connections
close after ``serve.keep_alive_s``.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import signal
import sys
from collections.abc import Callable
from typing import Any, cast

import trio
from mcp.server import ServerRequestContext
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from starlette.applications import Starlette
from starlette.requests import Request

from m3.actors import bridge
from m3.config import Config
from m3.errors import AddressInUse, M3Error, Unauthorized
from m3.gateway.http_guard import BodyGuard
from m3.gateway.mcp_server import M3Server, build_server
from m3.gateway.rest import TOOLS_PATH, rest_routes
from m3.gateway.service import CallContext, Service
from m3.protocols.messages.coordination import LookupToken
from m3.store.agents import hash_token

log = logging.getLogger(__name__)

MCP_PATH = "/mcp"
SCOPE = "m3"


class StoreTokenVerifier:
    """Bearer tokens checked against the store (``mcp.server.auth.provider.TokenVerifier``)."""

    def __init__(self, service: Service):
        self._service = service

    async def verify_token(self, token: str) -> AccessToken | None:
        try:
            agent = await bridge.ask(self._service.system.directory, LookupToken(token_hash=hash_token(token)),
                                     self._service.timeout)
        except M3Error as exc:
            log.warning("could not check a bearer token: %s", exc.message)
            return None  # fail closed
        if agent is None:
            return None
        return AccessToken(token=token, client_id=agent, scopes=[SCOPE], subject=agent, claims={"agent_id": agent})


def _as_token_agent(token: AccessToken, config: Config, surface: str) -> CallContext:
    """A call context acting as ``token``'s agent, bound to it."""
    agent = str((token.claims or {}).get("agent_id") or token.subject or token.client_id)
    return CallContext(agent_id=agent, user_id=config["identity.user_id"] or None, surface=surface, bound=True)


def token_identity(config: Config) -> Callable[[ServerRequestContext[Any]], CallContext]:
    """Each request acts as its token's agent, bound to it."""
    def identity(_ctx: ServerRequestContext[Any]) -> CallContext:
        token = get_access_token()
        if token is None:  # the auth middleware answers 401 before this; never act as nobody
            raise M3Error("a remote MCP call arrived without a verified token")
        return _as_token_agent(token, config, "mcp-http")

    return identity


def rest_identity(config: Config) -> Callable[[Request], CallContext]:
    """A tool route acts as its token's agent; no valid token is :class:`Unauthorized` (401)."""
    def identity(_request: Request) -> CallContext:
        token = get_access_token()  # set by the SDK's authentication middleware, which runs on every route
        if token is None or SCOPE not in token.scopes:
            raise Unauthorized("this route needs a valid bearer token")
        return _as_token_agent(token, config, "http")

    return identity


def build_http_app(service: Service, host: str, port: int) -> tuple[M3Server, Starlette]:
    """The MCP endpoint and the tool routes in one app, every request body guarded."""
    server = build_server(service, token_identity(service.config))
    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH, json_response=True, host=host,
        # Without `auth`, a token verifier alone makes every request 401 (no authentication middleware).
        auth=AuthSettings(issuer_url=f"http://{_netloc(host, port)}/", resource_server_url=None,
                          required_scopes=[SCOPE]),
        token_verifier=StoreTokenVerifier(service),
        custom_starlette_routes=rest_routes(service, rest_identity(service.config)),
    )
    app.add_middleware(BodyGuard, max_bytes=service.config["serve.max_body_bytes"],
                       timeout_s=service.config["serve.body_timeout_s"])
    return server, app


def _netloc(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


async def serve(service: Service, host: str, port: int, *, ready: Callable[[str], None] | None = None,
                shutdown: trio.Event | None = None) -> None:
    """Serve until ``shutdown`` is set (or SIGINT/SIGTERM in the main thread); ``ready`` gets the MCP URL.

    A port already in use is :class:`AddressInUse` (with the host and port in its details).
    """
    from hypercorn.config import Config as HypercornConfig

    _server, app = build_http_app(service, host, port)
    config = HypercornConfig()
    config.bind = [_netloc(host, port)]
    config.accesslog = None
    config.errorlog = logging.getLogger("hypercorn.error")
    config.keep_alive_timeout = service.config["serve.keep_alive_s"]
    stop = shutdown if shutdown is not None else trio.Event()
    try:
        await _serve_until(app, config, stop, own_signals=shutdown is None, ready=ready)
    except BaseExceptionGroup as group:
        in_use, _rest = group.split(lambda e: isinstance(e, OSError) and e.errno == errno.EADDRINUSE)
        if in_use is None:
            raise
        raise AddressInUse(f"cannot listen on {_netloc(host, port)}: the address is already in use",
                           details={"host": host, "port": port}) from None


async def _serve_until(app: Starlette, config: Any, stop: trio.Event, *, own_signals: bool,
                       ready: Callable[[str], None] | None) -> None:
    from hypercorn.trio import serve as hypercorn_serve

    async with trio.open_nursery() as nursery:
        if own_signals:
            nursery.start_soon(_stop_on_signals, stop)
        asgi = cast(Any, app)  # a Starlette app is an ASGI callable; hypercorn's stubs want a narrower type
        binds: list[str] = await nursery.start(
            lambda task_status: hypercorn_serve(asgi, config, shutdown_trigger=stop.wait, task_status=task_status))
        if ready is not None:
            ready(binds[0] + MCP_PATH)
        await stop.wait()
        nursery.cancel_scope.deadline = trio.current_time() + 10  # bounded graceful close of open streams


async def _stop_on_signals(stop: trio.Event) -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for _signum in signals:
            stop.set()
            return


def serve_http(config: Config, host: str, port: int) -> None:
    """``m3 serve``: start m3, serve MCP and the tool routes; print ``{"url", "tools_url", "pid"}`` once listening."""
    from m3.gateway.runtime import running

    def ready(url: str) -> None:
        tools = url.removesuffix(MCP_PATH) + TOOLS_PATH
        sys.stdout.write(json.dumps({"url": url, "tools_url": tools, "pid": os.getpid()}) + "\n")
        sys.stdout.flush()
        sys.stderr.write(f"m3: serving MCP on {url} and the tool routes under {tools}/; each client needs a token "
                         "(`m3 token create --agent NAME`)\n")

    with running(config) as service:
        trio.run(lambda: serve(service, host, port, ready=ready))
