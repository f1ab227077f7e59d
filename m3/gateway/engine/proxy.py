"""``m3 serve`` with the engine: the bearer-token HTTP server as a thin reverse proxy to the store's engine.

It listens on TCP (``serve.host``/``serve.port``), bounds request bodies as before (``BodyGuard``), and passes
``/mcp``, the tool routes and the OpenAPI document to the engine's socket over HTTP/1.1 (h11, hypercorn's own
HTTP library), responses streamed back (MCP notification streams included). The engine checks the bearer
token and binds the call to its agent; this proxy drops any ``X-M3-*`` header a remote client sends (only local
front-ends may say whom they speak for) and refuses a request without a token at once (401), except the
OpenAPI document. ``/v1/engine/*`` is not reachable from the network.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import h11
import trio
from starlette.types import Receive, Scope, Send

from m3 import __version__
from m3.config import Config
from m3.errors import EngineUnavailable, M3Error, Unauthorized
from m3.gateway.engine import client
from m3.gateway.engine.paths import EnginePaths, connect, engine_paths
from m3.gateway.engine.spawn import ensure_engine
from m3.gateway.http_guard import BodyGuard, error_body, serve_asgi

_FORWARDED = ("/mcp", "/v1/tools/", "/v1/openapi.json")
_NO_TOKEN_NEEDED = ("/v1/openapi.json",)
_DROPPED = {b"host", b"connection", b"content-length", b"transfer-encoding", b"keep-alive",
            *(h.lower().encode() for h in (client.AGENT_HEADER, client.USER_HEADER, client.VERSION_HEADER))}


class EngineProxy:
    def __init__(self, config: Config, paths: EnginePaths):
        self.config = config
        self.paths = paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        path: str = scope["path"]
        if not any(path == p or path.startswith(p) for p in _FORWARDED):
            await _answer(send, 404, {"error": {"code": "not_found", "message": f"no route {path}",
                                                "hint": "The routes are /mcp and /v1/tools/{name} (docs/http.md)."}})
            return
        headers = [(k.lower(), v) for k, v in scope["headers"]]
        if path not in _NO_TOKEN_NEEDED and not any(k == b"authorization" for k, _ in headers):
            error = Unauthorized("this route needs a valid bearer token")
            await _answer(send, 401, error_body(error), extra=[(b"www-authenticate", b'Bearer realm="m3"')])
            return
        body = b""
        while True:  # the guard in front has buffered the whole body already
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        try:
            await self._forward(scope, headers, body, send)
        except M3Error as exc:
            await _answer(send, exc.http_status, error_body(exc))

    async def _forward(self, scope: Scope, headers: list[tuple[bytes, bytes]], body: bytes, send: Send) -> None:
        stream = await self._open()
        conn = h11.Connection(h11.CLIENT)
        sent = [(k, v) for k, v in headers if k not in _DROPPED]
        sent += [(b"host", b"localhost"), (b"content-length", str(len(body)).encode()),
                 (client.VERSION_HEADER.lower().encode(), __version__.encode())]
        target = scope.get("raw_path") or scope["path"].encode()
        if scope.get("query_string"):
            target += b"?" + scope["query_string"]
        try:
            await stream.send_all(conn.send(h11.Request(method=scope["method"], target=target, headers=sent)))
            await stream.send_all(conn.send(h11.Data(data=body)) + conn.send(h11.EndOfMessage()))
            await _relay_response(conn, stream, send)
        except (trio.BrokenResourceError, trio.ClosedResourceError, h11.RemoteProtocolError) as exc:
            raise EngineUnavailable(f"the engine went away during the request ({type(exc).__name__})") from None
        finally:
            await stream.aclose()

    async def _open(self) -> trio.SocketStream:
        for _attempt in range(2):
            try:
                sock = connect(self.paths.sock, timeout=5.0)
            except (FileNotFoundError, ConnectionRefusedError):
                await trio.to_thread.run_sync(ensure_engine, self.config, self.paths)
                continue
            sock.setblocking(False)
            return trio.SocketStream(trio.socket.from_stdlib_socket(sock))
        raise EngineUnavailable("the engine of this store did not start", details={"log": str(self.paths.log)})


async def _relay_response(conn: h11.Connection, stream: trio.SocketStream, send: Send) -> None:
    started = False
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            conn.receive_data(await stream.receive_some(65536))
            continue
        if isinstance(event, h11.InformationalResponse):
            continue
        if isinstance(event, h11.Response):
            kept = [(k, v) for k, v in event.headers if k.lower() not in (b"connection", b"transfer-encoding")]
            await send({"type": "http.response.start", "status": event.status_code, "headers": kept})
            started = True
        elif isinstance(event, h11.Data):
            await send({"type": "http.response.body", "body": bytes(event.data), "more_body": True})
        elif isinstance(event, h11.EndOfMessage | h11.ConnectionClosed):
            if started:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                return
            raise EngineUnavailable("the engine closed the connection without an answer")


async def _answer(send: Send, status: int, body: Any, extra: list[tuple[bytes, bytes]] | None = None) -> None:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()),
                            *(extra or [])]})
    await send({"type": "http.response.body", "body": data})


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


def serve_http(config: Config, host: str, port: int) -> None:
    """``m3 serve`` relaying to the engine: print ``{"url", "tools_url", "pid"}`` once listening."""
    import errno

    from m3.errors import AddressInUse
    from m3.gateway.http_guard import netloc

    paths = engine_paths(config)
    ensure_engine(config, paths)
    app = BodyGuard(EngineProxy(config, paths), max_bytes=config["serve.max_body_bytes"],
                    timeout_s=config["serve.body_timeout_s"])

    def ready(binds: list[str]) -> None:
        url = binds[0] + "/mcp"
        tools = binds[0] + "/v1/tools"
        sys.stdout.write(json.dumps({"url": url, "tools_url": tools, "pid": os.getpid()}) + "\n")
        sys.stdout.flush()
        sys.stderr.write(f"m3: serving MCP on {url} and the tool routes under {tools}/ (relayed to the store's "
                         "engine); each client needs a token (`m3 token create --agent NAME`)\n")

    async def main() -> None:
        try:
            await serve_asgi(app, host, port, ready=ready, keep_alive_s=config["serve.keep_alive_s"])
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
            raise AddressInUse(f"cannot listen on {netloc(host, port)}: the address is already in use",
                               details={"host": host, "port": port}) from None

    trio.run(main)
