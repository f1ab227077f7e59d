"""``m3 serve``: remote MCP (Streamable HTTP) and the tool routes on trio (hypercorn), behind bearer tokens.

A valid token acts as its agent (``CallContext.bound``); tokens are looked up by their SHA-256 in the
store on every request, so a revocation holds from the next one (docs/coordination.md, docs/http.md).

POST responses are JSON rather than SSE (``json_response``): the SDK's
client leaves SSE generators unclosed on trio, and a tool call has one
answer anyway; ``tools/list_changed`` still reaches clients on their
notification streams.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import sys
from collections.abc import Callable
from typing import Any

import trio
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from starlette.applications import Starlette

from m3.config import Config
from m3.errors import AddressInUse, M3Error, Unauthorized
from m3.gateway.http_guard import BodyGuard, netloc, serve_asgi
from m3.gateway.mcp_server import build_server
from m3.gateway.rest import MCP_PATH, TOOLS_PATH, rest_routes
from m3.gateway.service import CallContext, Service
from m3.protocols.messages.coordination import LookupToken
from m3.store.agents import hash_token

log = logging.getLogger(__name__)

SCOPE = "m3"


class StoreTokenVerifier:
    """Bearer tokens checked against the store (``mcp.server.auth.provider.TokenVerifier``)."""

    def __init__(self, service: Service):
        self._service = service

    async def verify_token(self, token: str) -> AccessToken | None:
        try:
            agent = await self._service.ask(self._service.system.directory, LookupToken(token_hash=hash_token(token)))
        except M3Error as exc:
            log.warning("could not check a bearer token: %s", exc.message)
            return None  # fail closed
        if agent is None:
            return None
        return AccessToken(token=token, client_id=agent, scopes=[SCOPE], subject=agent, claims={"agent_id": agent})


def token_identity(config: Config) -> Callable[[Any], CallContext]:
    """Each request acts as its token's agent, bound to it; no valid token is :class:`Unauthorized` (401).

    The token is set by the SDK's authentication middleware, which runs on every route (``/mcp`` answers 401
    itself before any handler runs, so there it is never missing).
    """
    user = config["identity.user_id"] or None

    def identity(_request: Any) -> CallContext:
        token = get_access_token()
        if token is None or SCOPE not in token.scopes:
            raise Unauthorized("this route needs a valid bearer token")
        return CallContext(agent_id=token.client_id, user_id=user, bound=True)

    return identity


def build_http_app(service: Service, host: str, port: int) -> Starlette:
    """The MCP endpoint and the tool routes in one app, every request body guarded."""
    identity = token_identity(service.config)
    server = build_server(service, identity)
    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH, json_response=True, host=host,
        # Without `auth`, a token verifier alone makes every request 401 (no authentication middleware).
        auth=AuthSettings(issuer_url=f"http://{netloc(host, port)}/", resource_server_url=None,
                          required_scopes=[SCOPE]),
        token_verifier=StoreTokenVerifier(service),
        custom_starlette_routes=rest_routes(service, identity),
    )
    app.add_middleware(BodyGuard, max_bytes=service.config["serve.max_body_bytes"],
                       timeout_s=service.config["serve.body_timeout_s"])
    return app


async def serve(service: Service, host: str, port: int, *, ready: Callable[[str], None],
                shutdown: trio.Event | None = None) -> None:
    """Serve until ``shutdown`` is set (or SIGINT/SIGTERM in the main thread); ``ready`` gets the MCP URL.

    A port already in use is :class:`AddressInUse` (with the host and port in its details).
    """
    try:
        await serve_asgi(build_http_app(service, host, port), host, port, shutdown=shutdown,
                         ready=lambda binds: ready(binds[0] + MCP_PATH),
                         keep_alive_s=service.config["serve.keep_alive_s"])
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise
        raise AddressInUse(f"cannot listen on {netloc(host, port)}: the address is already in use",
                           details={"host": host, "port": port}) from None


def serve_http(config: Config, host: str, port: int) -> None:
    """``m3 serve``: start m3, serve MCP and the tool routes; print ``{"url", "tools_url", "pid"}`` once listening."""
    from m3.gateway.runtime import running

    def ready(url: str) -> None:
        tools = url.removesuffix(MCP_PATH) + TOOLS_PATH
        sys.stdout.write(json.dumps({"url": url, "tools_url": tools, "pid": os.getpid()}) + "\n")
        sys.stdout.flush()
        sys.stderr.write(f"m3: serving MCP on {url} and the tool routes under {tools}/; each client needs a token "
                         "(`m3 token create --agent NAME`)\n")

    with running(config, long_lived=True) as service:
        trio.run(lambda: serve(service, host, port, ready=ready))
