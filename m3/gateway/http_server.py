"""Remote MCP: Streamable HTTP on trio (hypercorn) behind per-agent bearer tokens.

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
"""

from __future__ import annotations

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

from m3.actors import bridge
from m3.config import Config
from m3.errors import M3Error
from m3.gateway.mcp_server import M3Server, build_server
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


def token_identity(config: Config) -> Callable[[ServerRequestContext[Any]], CallContext]:
    """Each request acts as its token's agent, bound to it."""
    user = config["identity.user_id"] or None

    def identity(_ctx: ServerRequestContext[Any]) -> CallContext:
        token = get_access_token()
        if token is None:  # the auth middleware answers 401 before this; never act as nobody
            raise M3Error("a remote MCP call arrived without a verified token")
        agent = str((token.claims or {}).get("agent_id") or token.subject or token.client_id)
        return CallContext(agent_id=agent, user_id=user, surface="mcp-http", bound=True)

    return identity


def build_http_app(service: Service, host: str, port: int) -> tuple[M3Server, Starlette]:
    server = build_server(service, token_identity(service.config))
    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH, json_response=True, host=host,
        # Without `auth`, a token verifier alone makes every request 401 (no authentication middleware).
        auth=AuthSettings(issuer_url=f"http://{_netloc(host, port)}/", resource_server_url=None,
                          required_scopes=[SCOPE]),
        token_verifier=StoreTokenVerifier(service),
    )
    return server, app


def _netloc(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


async def serve(service: Service, host: str, port: int, *, ready: Callable[[str], None] | None = None,
                shutdown: trio.Event | None = None) -> None:
    """Serve until ``shutdown`` is set (or SIGINT/SIGTERM in the main thread); ``ready`` gets the MCP URL."""
    from hypercorn.config import Config as HypercornConfig
    from hypercorn.trio import serve as hypercorn_serve

    _server, app = build_http_app(service, host, port)
    config = HypercornConfig()
    config.bind = [_netloc(host, port)]
    config.accesslog = None
    config.errorlog = logging.getLogger("hypercorn.error")
    stop = shutdown if shutdown is not None else trio.Event()
    async with trio.open_nursery() as nursery:
        if shutdown is None:
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
    """``m3 serve``: start m3, serve remote MCP, print ``{"url", "pid"}`` on stdout once listening."""
    from m3.gateway.runtime import running

    def ready(url: str) -> None:
        sys.stdout.write(json.dumps({"url": url, "pid": os.getpid()}) + "\n")
        sys.stdout.flush()
        sys.stderr.write(f"m3: serving MCP on {url}; each client needs a token (`m3 token create --agent NAME`)\n")

    with running(config) as service:
        trio.run(lambda: serve(service, host, port, ready=ready))
