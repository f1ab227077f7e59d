"""A stand-in chat model for tests: a real HTTP server speaking the OpenAI chat completions wire protocol.

m3 never gets a mock object: its client (:mod:`m3.cognition.llm`) talks HTTP to this server on 127.0.0.1,
which answers ``POST /v1/chat/completions`` with the real response JSON (``id``, ``object:
"chat.completion"``, ``created``, ``model``, ``choices[{index, message{role, content}, finish_reason}]``,
``usage``) and ``GET /v1/models`` with the model list. What it answers comes from a script, one entry per
request, in order:

- a ``str``: the assistant message's content (``json.dumps(...)`` it for a JSON-mode answer);
- a callable of the request body (a dict) returning the content, for answers that depend on the question;
- :class:`Status`: an HTTP error with an OpenAI-shaped error body and an optional ``Retry-After``;
- :data:`HOLD`: the request blocks until :meth:`ChatServer.release` (or the server stops), so a client's
  timeout can be tested without sleeping.

When the script runs out, :attr:`ChatServer.default` answers (a 500 unless set). Every request body is recorded
in :attr:`ChatServer.requests` (with its headers in :attr:`ChatServer.headers`)::

    with ChatServer([json.dumps({"items": []}), Status(429, retry_after=2), "{}"]) as server:
        model = OpenAIChatModel(server.url, server.model)
        ...
        assert server.requests[0]["response_format"] == {"type": "json_object"}
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Status:
    """An HTTP error answer: ``status`` with an OpenAI error body, and ``Retry-After`` when given."""

    status: int
    message: str = "scripted error"
    retry_after: float | None = None


class _Hold:
    def __repr__(self) -> str:
        return "HOLD"


#: A script entry: block the request until the server is released or stopped.
HOLD = _Hold()

Answer = str | Callable[[dict[str, Any]], str] | Status | _Hold


class ChatServer:
    """The stand-in server, on a free port of 127.0.0.1, serving in a background thread.

    Args:
        script: Answers, one per chat request, in order.
        model: The model name it lists and echoes.
        key: When set, requests without ``Authorization: Bearer <key>`` get a 401.
    """

    def __init__(self, script: Iterable[Answer] = (), *, model: str = "stand-in-1", key: str = "") -> None:
        self.script: list[Answer] = list(script)
        self.default: Answer = Status(500, "the script is exhausted")
        self.model = model
        self.key = key
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self._released = threading.Event()
        self._lock = threading.Lock()
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._http.daemon_threads = True
        self._thread = threading.Thread(target=self._http.serve_forever, args=(0.05,), name="chat-stand-in",
                                        daemon=True)

    @property
    def url(self) -> str:
        """The API base, what ``llm.url`` is set to: ``http://127.0.0.1:<port>/v1``."""
        return f"http://127.0.0.1:{self._http.server_address[1]}/v1"

    def add(self, *answers: Answer) -> None:
        """Append answers to the script."""
        with self._lock:
            self.script.extend(answers)

    def release(self) -> None:
        """Let every held request (and every later :data:`HOLD`) go on; a released hold answers a 503."""
        self._released.set()

    def start(self) -> ChatServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.release()
        self._http.shutdown()
        self._http.server_close()
        self._thread.join(timeout=10)

    def __enter__(self) -> ChatServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- used by the handler ------------------------------------------------------------------

    def _next(self, body: dict[str, Any], headers: dict[str, str]) -> Answer | None:
        """Record the request; its scripted answer, or None when it lacks the key (the script is kept)."""
        with self._lock:
            self.requests.append(body)
            self.headers.append(headers)
            if self.key and headers.get("authorization") != f"Bearer {self.key}":
                return None
            return self.script.pop(0) if self.script else self.default

    def _wait_released(self, timeout_s: float) -> None:
        self._released.wait(timeout_s)


def completion(model: str, content: str, n: int) -> dict[str, Any]:
    """The response body of a chat completion, as the OpenAI API shapes it."""
    return {
        "id": f"chatcmpl-standin-{n}", "object": "chat.completion", "created": int(time.time()), "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 0, "completion_tokens": len(content.split()),
                  "total_tokens": len(content.split())},
    }


#: How long a held request waits at most for release (a test that forgets to release still ends).
HOLD_LIMIT_S = 30.0


def _handler_for(server: ChatServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass  # tests read the recorded requests, not a log on stderr

        def do_GET(self) -> None:
            if self.path.rstrip("/") != "/v1/models":
                self._send(404, _error("no such route", "not_found"))
                return
            self._send(200, {"object": "list", "data": [{"id": server.model, "object": "model", "created": 0,
                                                         "owned_by": "m3-tests"}]})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            if self.path.rstrip("/") != "/v1/chat/completions":
                self._send(404, _error("no such route", "not_found"))
                return
            try:
                body = json.loads(raw)
            except ValueError:
                self._send(400, _error("the body is not JSON", "invalid_request_error"))
                return
            answer = server._next(body, {k.lower(): v for k, v in self.headers.items()})
            if answer is None:
                self._send(401, _error("Incorrect API key provided", "invalid_api_key"))
                return
            self._answer(answer, body, len(server.requests))

        def _answer(self, answer: Answer, body: dict[str, Any], n: int) -> None:
            if isinstance(answer, _Hold):
                server._wait_released(HOLD_LIMIT_S)
                answer = Status(503, "released after a hold")
            if isinstance(answer, Status):
                extra = {} if answer.retry_after is None else {"Retry-After": f"{answer.retry_after:g}"}
                self._send(answer.status, _error(answer.message, "server_error"), extra)
                return
            content = answer(body) if callable(answer) else answer
            self._send(200, completion(str(body.get("model", server.model)), content, n))

        def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
            data = json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (its timeout): nothing to answer

    return Handler


def _error(message: str, kind: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}
