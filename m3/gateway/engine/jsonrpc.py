"""JSON-RPC 2.0 over newline-delimited stdio, as MCP's stdio transport frames it. Standard library only.

The stdio front-end (:mod:`m3.gateway.engine.relay`) speaks it directly instead of running the MCP SDK's
server in every ``m3`` process: that server was the largest part of a relayed call's CPU
(docs/benchmarks.md, "One engine per store"). This module knows framing and the protocol's error codes, not
MCP: :class:`Peer` reads messages from one stream, hands each request to a handler (on the reading thread,
or on a thread of its own when the handler is slow, such as a relayed tool call that may park), writes
answers and notifications to the other stream one whole line at a time, and drops the answer of a request
the client cancelled. Once the reader has ended nothing more is written: a call's thread still running then
is a daemon, and one caught writing while the interpreter shuts down would abort the process (Python's
"could not acquire lock for stdout at interpreter shutdown").
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, Any

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603

RequestId = str | int


class RpcError(Exception):
    """Raised by a handler: answered as a JSON-RPC error with ``code`` and ``message``."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass
class Inflight:
    """A request being handled on a thread of its own. ``cancelled`` is set when the client cancels it; the
    hooks registered then (e.g. closing the engine connection it waits on) run once, under a lock, so a hook
    removed by the handler never runs after its removal returned."""

    cancelled: threading.Event = field(default_factory=threading.Event)
    hooks: list[Callable[[], None]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def when_cancelled(self, hook: Callable[[], None]) -> Callable[[], None]:
        """Run ``hook`` on cancellation (at once if already cancelled); returns what removes it."""
        with self.lock:
            if self.cancelled.is_set():
                hook()
            else:
                self.hooks.append(hook)

        def remove() -> None:
            with self.lock:
                if hook in self.hooks:
                    self.hooks.remove(hook)

        return remove

    def cancel(self) -> None:
        with self.lock:
            if self.cancelled.is_set():
                return
            self.cancelled.set()
            hooks, self.hooks = self.hooks, []
            for hook in hooks:
                hook()


#: A quick request handler: ``params`` → result (a JSON object), or :class:`RpcError`. Runs on the reading thread.
Handler = Callable[[dict[str, Any]], dict[str, Any]]
#: A slow one: also given its :class:`Inflight`; runs on a thread of its own.
SlowHandler = Callable[[dict[str, Any], Inflight], dict[str, Any]]


class Peer:
    """One JSON-RPC connection over ``reader``/``writer`` (binary, one message per line).

    ``handlers`` answer requests by method; ``slow`` ones run on their own thread (at most ``max_slow`` at
    once; more wait for a slot on the reading thread, which is back-pressure on the client). ``notified``
    methods are notifications this side acts on (``notifications/cancelled`` is handled here); any other
    notification, and any response (this side sends no requests), is ignored, as the protocol asks.
    """

    def __init__(self, reader: IO[bytes], writer: IO[bytes], *, handlers: dict[str, Handler],
                 slow: dict[str, SlowHandler], notified: dict[str, Callable[[dict[str, Any]], None]],
                 max_slow: int = 64):
        self._reader = reader
        self._writer = writer
        self._handlers = handlers
        self._slow = slow
        self._notified = notified
        self._slots = threading.BoundedSemaphore(max_slow)
        self._write_lock = threading.Lock()
        self._inflight: dict[RequestId, Inflight] = {}
        self._inflight_lock = threading.Lock()
        self._closed = False  # set under _write_lock when the reader ends: later answers are dropped

    def serve(self) -> None:
        """Read and dispatch until the reader ends (the client closed its side). When this returns, no
        answer or notification will be written any more (one being written has been written whole)."""
        try:
            for line in self._reader:
                if line.strip():
                    self._dispatch(line)
        finally:
            with self._write_lock:
                self._closed = True

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        """Send a notification."""
        self._send({"jsonrpc": "2.0", "method": method, **({"params": params} if params is not None else {})})

    def _dispatch(self, line: bytes) -> None:
        try:
            message = json.loads(line)
        except ValueError:  # UnicodeDecodeError is one too
            self._error(None, PARSE_ERROR, "Parse error: a message is not valid JSON")
            return
        if not isinstance(message, dict):  # batches were removed from MCP (2025-06-18); a scalar is no message
            self._error(None, INVALID_REQUEST, "Invalid Request: a message must be a JSON object")
            return
        method = message.get("method")
        has_id = "id" in message
        if method is None and ("result" in message or "error" in message):
            return  # a response; this side sends no requests
        request_id = message.get("id")
        if message.get("jsonrpc") != "2.0" or not isinstance(method, str) or (has_id and not _valid_id(request_id)):
            self._error(request_id if _valid_id(request_id) else None, INVALID_REQUEST,
                        "Invalid Request: needs jsonrpc 2.0, a method name and a string or integer id")
            return
        params = message.get("params", {})
        if not isinstance(params, dict):
            if request_id is not None:
                self._error(request_id, INVALID_PARAMS, "Invalid params: params must be an object")
            return
        if request_id is None:
            self._notification(method, params)
        elif method in self._slow:
            self._start_slow(request_id, self._slow[method], params)
        elif method in self._handlers:
            self._answer(request_id, lambda: self._handlers[method](params))
        else:
            self._error(request_id, METHOD_NOT_FOUND, f"Method not found: {method}")

    def _notification(self, method: str, params: dict[str, Any]) -> None:
        if method == "notifications/cancelled":
            with self._inflight_lock:
                inflight = self._inflight.get(params.get("requestId"))  # type: ignore[arg-type]
            if inflight is not None:
                inflight.cancel()
            return
        act = self._notified.get(method)
        if act is not None:
            act(params)

    def _start_slow(self, request_id: RequestId, handler: SlowHandler, params: dict[str, Any]) -> None:
        inflight = Inflight()
        with self._inflight_lock:
            if request_id in self._inflight:
                self._error(request_id, INVALID_REQUEST, "Invalid Request: this id is already in use")
                return
            self._inflight[request_id] = inflight
        self._slots.acquire()

        def run() -> None:
            try:
                self._answer(request_id, lambda: handler(params, inflight), inflight)
            finally:
                with self._inflight_lock:
                    self._inflight.pop(request_id, None)
                self._slots.release()

        threading.Thread(target=run, name=f"m3-call-{request_id}", daemon=True).start()

    def _answer(self, request_id: RequestId, compute: Callable[[], dict[str, Any]],
                inflight: Inflight | None = None) -> None:
        try:
            result = compute()
        except RpcError as exc:
            reply: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id,
                                     "error": {"code": exc.code, "message": exc.message}}
        except Exception as exc:  # a bug here must not end the session; the client gets an internal error
            reply = {"jsonrpc": "2.0", "id": request_id,
                     "error": {"code": INTERNAL_ERROR, "message": f"Internal error: {type(exc).__name__}"}}
        else:
            reply = {"jsonrpc": "2.0", "id": request_id, "result": result}
        if inflight is not None and inflight.cancelled.is_set():
            return  # the client cancelled it: no answer (MCP, "Cancellation")
        self._send(reply)

    def _error(self, request_id: RequestId | None, code: int, message: str) -> None:
        self._send({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}})

    def _send(self, message: dict[str, Any]) -> None:
        # ASCII with escapes: any text (a lone surrogate in an echoed id included) makes one valid line.
        data = json.dumps(message, separators=(",", ":")).encode("ascii") + b"\n"
        with self._write_lock:
            if self._closed:
                return  # the client is gone; writing now could race the interpreter's shutdown
            self._writer.write(data)
            self._writer.flush()


def _valid_id(value: Any) -> bool:
    return isinstance(value, str | int) and not isinstance(value, bool)
