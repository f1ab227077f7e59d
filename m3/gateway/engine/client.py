"""HTTP/1.1 to the engine over its Unix socket with the standard library (no httpx, pydantic or SQLAlchemy).

Every request carries who the front-end speaks for (``X-M3-Agent``, ``X-M3-User``) and its version
(``X-M3-Version``); the engine trusts these because only the socket's owner can connect (mode 0600 in a
0700 folder), as the local OS user is trusted with the store's files anyway.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from m3 import __version__
from m3.errors import InvalidArgument
from m3.gateway.engine.paths import connect

AGENT_HEADER = "X-M3-Agent"
USER_HEADER = "X-M3-User"
VERSION_HEADER = "X-M3-Version"
SETTINGS_HEADER = "X-M3-Settings"
TOOLS_PATH = "/v1/tools"
STATUS_PATH = "/v1/engine/status"
STATS_PATH = "/v1/engine/stats"
STOP_PATH = "/v1/engine/stop"
FLUSH_PATH = "/v1/engine/flush"


class EngineDown(Exception):
    """Nobody listens on the socket (no engine, or a dead one): the request was not sent."""


class EngineLost(Exception):
    """The engine went away after the request was sent: whether it ran is unknown."""


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, sock_path: Path, timeout: float | None):
        super().__init__("localhost", timeout=timeout)
        self._sock_path = sock_path

    def connect(self) -> None:
        self.sock = connect(self._sock_path, self.timeout)


def identity_headers(agent_id: str | None, user_id: str | None, settings: str | None = None) -> dict[str, str]:
    headers = {VERSION_HEADER: __version__}
    if settings is not None:
        headers[SETTINGS_HEADER] = settings
    if agent_id is not None:
        headers[AGENT_HEADER] = agent_id
    if user_id is not None:
        headers[USER_HEADER] = user_id
    return headers


def request(sock_path: Path, method: str, path: str, body: Any = None, *, headers: dict[str, str] | None = None,
            timeout: float | None = None) -> tuple[int, Any]:
    """One request; ``(status, JSON body)``. :class:`EngineDown` before sending, :class:`EngineLost` after."""
    conn = _UnixConnection(sock_path, timeout)
    try:
        try:
            conn.connect()
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            raise EngineDown(str(exc)) from None
        data = b"" if body is None else _encoded(body)
        sent = {"Content-Type": "application/json", "Content-Length": str(len(data)), **(headers or {})}
        try:
            conn.request(method, path, body=data, headers=sent)
            response = conn.getresponse()
            raw = response.read()
        except (ConnectionError, http.client.HTTPException, TimeoutError) as exc:
            raise EngineLost(f"{type(exc).__name__}: {exc}") from None
        return response.status, json.loads(raw) if raw else None
    finally:
        conn.close()


def call_tool(sock_path: Path, name: str, args: dict[str, Any], headers: dict[str, str],
              timeout: float | None = None) -> tuple[int, Any]:
    return request(sock_path, "POST", f"{TOOLS_PATH}/{name}", args, headers=headers, timeout=timeout)


#: Given a call's socket before the request goes out (to abort it from another thread); returns what stops that.
Watch = Callable[[socket.socket], Callable[[], None]]

#: How long an unused kept-alive connection is reused: well inside the engine's keep-alive timeout (75 s), so
#: the engine never closes one while a request is on its way.
KEEP_IDLE_S = 30.0


class Connections:
    """Kept-alive connections to one engine socket, for a long-lived front-end (the stdio MCP relay).

    A new connection per call costs the engine an accept, a protocol object and a close each time, about
    half of its gateway CPU per call (docs/benchmarks.md, "engine"); here a call takes an idle connection
    and gives it back after a complete answer. Concurrent calls (a parked ``notifications_wait`` beside a
    write) each hold their own. A connection unused for :data:`KEEP_IDLE_S`, or that the engine closed
    (it stopped or was replaced: the socket reads end-of-file), is dropped before it is used, so the request
    goes out on a new one. Errors are those of :func:`request`. Thread-safe.
    """

    def __init__(self, sock_path: Path, *, keep_idle_s: float = KEEP_IDLE_S):
        self._sock_path = sock_path
        self._keep_idle_s = keep_idle_s
        self._idle: list[tuple[_UnixConnection, float]] = []
        self._lock = threading.Lock()
        self.opened = 0  # connections made so far (what keep-alive saves is visible here)

    def call_tool(self, name: str, args: dict[str, Any], headers: dict[str, str], *,
                  watch: Watch | None = None) -> tuple[int, Any]:
        """``(status, JSON body)`` of ``POST /v1/tools/{name}``. ``watch`` is given the connection's socket
        before the request goes out, so another thread can abort the call (``shutdown``: this call then
        raises :class:`EngineLost`); what it returns is called when the call is over, before the connection
        serves another call."""
        data = _encoded(args)
        sent = {"Content-Type": "application/json", "Content-Length": str(len(data)), **headers}
        conn = self._take()
        reusable = False
        unwatch = watch(conn.sock) if watch is not None and conn.sock is not None else None
        try:
            try:
                conn.request("POST", f"{TOOLS_PATH}/{name}", body=data, headers=sent)
                response = conn.getresponse()
                raw = response.read()
            except (ConnectionError, http.client.HTTPException, TimeoutError, OSError) as exc:
                raise EngineLost(f"{type(exc).__name__}: {exc}") from None
            reusable = not response.will_close
            return response.status, json.loads(raw) if raw else None
        finally:
            if unwatch is not None:
                unwatch()
            if reusable:  # (one an abort shut down after the answer is dropped when next taken)
                with self._lock:
                    self._idle.append((conn, time.monotonic()))
            else:
                conn.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn, _used in idle:
            conn.close()

    def _take(self) -> _UnixConnection:
        """An idle connection still open on the engine's side, or a new one (:class:`EngineDown` if none)."""
        now = time.monotonic()
        while True:
            with self._lock:
                if not self._idle:
                    break
                conn, used = self._idle.pop()
            if now - used < self._keep_idle_s and _open(conn):
                return conn
            conn.close()
        conn = _UnixConnection(self._sock_path, None)
        try:
            conn.connect()
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            raise EngineDown(str(exc)) from None
        self.opened += 1
        return conn


def _open(conn: http.client.HTTPConnection) -> bool:
    """Whether an idle connection is still open: nothing to read yet (the engine closing it makes it readable)."""
    if conn.sock is None:
        return False
    try:
        conn.sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
    except BlockingIOError:
        return True
    except OSError:
        return False
    return False  # end-of-file (or bytes nobody asked for): not usable for the next request


def status(sock_path: Path, timeout: float = 5.0) -> dict[str, Any] | None:
    """The engine's status document, or None when no engine answers on the socket."""
    try:
        code, body = request(sock_path, "GET", STATUS_PATH, timeout=timeout)
    except (EngineDown, EngineLost, TimeoutError, OSError):
        return None
    return body if code == 200 and isinstance(body, dict) else None


def _encoded(body: Any) -> bytes:
    """``body`` as UTF-8 JSON; text that UTF-8 cannot carry (a lone surrogate) is the caller's error, refused here
    as the engine would refuse it, never a traceback."""
    try:
        return json.dumps(body, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidArgument(f"an argument holds text that is not valid Unicode ({exc.reason})",
                              hint="Pass text without lone surrogate characters.") from None
