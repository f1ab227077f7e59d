"""An ASGI guard for ``m3 serve``: a bounded request body, received within a deadline.

Hypercorn bounds idle keep-alive connections (``keep_alive_timeout``) but
has no limit on a body's size or on how long a client may take to send
it: its ``read_timeout`` restarts on every byte, so a client trickling a
body holds the connection for ever, and it would also cut long-lived
notification streams on which a client sends nothing. This guard reads the
whole body first, refusing one over ``max_bytes`` (413
``request_too_large``) or not complete within ``timeout_s`` (408
``request_timeout``), then hands the buffered body to the app. A refusal
carries ``Connection: close``, so the server closes the connection instead
of waiting for the rest of a body it will never read.
"""

from __future__ import annotations

import json
from typing import Any

import trio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from m3.errors import M3Error, RequestTimeout, RequestTooLarge


class BodyGuard:
    """Wraps an ASGI app; only ``http`` requests are guarded (lifespan passes through)."""

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
            await send_error(send, exc, close=True)
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
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


def error_body(error: M3Error) -> bytes:
    """The CLI's error document, ``{"error": {"code", "message", "hint", ...}}``, as JSON bytes."""
    return json.dumps({"error": error.to_dict()}, ensure_ascii=False).encode()


async def send_error(send: Send, error: M3Error, *, close: bool = False,
                     headers: list[tuple[bytes, bytes]] | None = None) -> None:
    """Answer with ``error`` at its ``http_status``; ``close`` asks the server to close the connection."""
    body = error_body(error)
    extra: list[tuple[bytes, bytes]] = list(headers or [])
    if close:
        extra.append((b"connection", b"close"))
    start: dict[str, Any] = {"type": "http.response.start", "status": error.http_status,
                             "headers": [(b"content-type", b"application/json"),
                                         (b"content-length", str(len(body)).encode()), *extra]}
    await send(start)
    await send({"type": "http.response.body", "body": body})
