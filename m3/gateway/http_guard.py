"""ASGI plumbing of m3's HTTP servers: serving on trio (hypercorn), a bounded request body, error answers.

Hypercorn has no limit on a body's size or on how long a client may take to
send it (its ``read_timeout`` restarts on every byte and would cut notification
streams), so :class:`BodyGuard` reads the whole body first, within a deadline
(docs/http.md, "Limits and timeouts").
"""

from __future__ import annotations

import json
import logging
import signal
from collections.abc import Callable
from functools import partial
from typing import Any

import trio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from m3.errors import M3Error, RequestTimeout, RequestTooLarge


class BodyGuard:
    """Wraps an ASGI app; only ``http`` requests are guarded (lifespan passes through).

    A body over ``max_bytes`` is 413 ``request_too_large``, one not complete within ``timeout_s`` 408
    ``request_timeout``; a refusal carries ``Connection: close``, so the server does not wait for the rest.
    """

    def __init__(self, app: ASGIApp, *, max_bytes: int, timeout_s: float):
        self.app = app
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            body = await self._read_body(scope, receive)
        except M3Error as exc:
            await _send_refusal(send, exc)
            return
        if body is None:
            return  # the client went away before sending its request
        await self.app(scope, _replay(body, receive), send)

    async def _read_body(self, scope: Scope, receive: Receive) -> bytes | None:
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            raise self._too_large()
        chunks: list[bytes] = []
        size = 0
        with trio.move_on_after(self.timeout_s) as deadline:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return None
                chunk: bytes = message.get("body", b"")
                size += len(chunk)
                if size > self.max_bytes:
                    raise self._too_large()
                chunks.append(chunk)
                if not message.get("more_body", False):
                    return b"".join(chunks)
        assert deadline.cancelled_caught
        raise RequestTimeout(f"the request body did not arrive within {self.timeout_s:g} s",
                             details={"timeout_s": self.timeout_s})

    def _too_large(self) -> RequestTooLarge:
        return RequestTooLarge(f"the request body is over {self.max_bytes} bytes",
                               details={"max_bytes": self.max_bytes})


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that yields the buffered body once, then what the client sends next (a disconnect)."""
    pending: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]

    async def replayed() -> Message:
        return pending.pop() if pending else await receive()

    return replayed


def error_body(error: M3Error) -> bytes:
    """The CLI's error document, ``{"error": {"code", "message", "hint", ...}}``, as JSON bytes."""
    return json.dumps({"error": error.to_dict()}, ensure_ascii=False).encode()


async def _send_refusal(send: Send, error: M3Error) -> None:
    """Answer with ``error`` at its ``http_status`` and ask the server to close the connection."""
    body = error_body(error)
    await send({"type": "http.response.start", "status": error.http_status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})


def netloc(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


async def serve_asgi(app: Any, host: str, port: int, *, ready: Callable[[list[str]], None],
                     shutdown: trio.Event | None = None, keep_alive_s: float | None = None) -> None:
    """Serve ``app`` until ``shutdown`` is set (without one: SIGINT or SIGTERM); ``ready`` gets the bound URLs.

    Raises the :class:`OSError` that kept it from listening (a port in use …), out of its exception group.
    """
    from hypercorn.config import Config
    from hypercorn.trio import serve

    config = Config()
    config.bind = [netloc(host, port)]
    config.accesslog = None
    config.errorlog = logging.getLogger("hypercorn.error")
    if keep_alive_s is not None:
        config.keep_alive_timeout = keep_alive_s
    stop = shutdown if shutdown is not None else trio.Event()
    try:
        async with trio.open_nursery() as nursery:
            if shutdown is None:
                nursery.start_soon(_stop_on_signals, stop)
            ready(await nursery.start(partial(serve, app, config, shutdown_trigger=stop.wait)))
            await stop.wait()
            nursery.cancel_scope.deadline = trio.current_time() + 10  # bounded graceful close of open streams
    except BaseExceptionGroup as group:
        failure: BaseException | None = group.split(OSError)[0]
        while isinstance(failure, BaseExceptionGroup):
            failure = failure.exceptions[0]
        if failure is None:
            raise
        raise failure from None


async def _stop_on_signals(stop: trio.Event) -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for _signum in signals:
            stop.set()
            return
