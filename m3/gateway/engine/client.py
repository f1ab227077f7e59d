"""HTTP/1.1 to the engine over its Unix socket with the standard library (no httpx, pydantic or SQLAlchemy).

Every request carries who the front-end speaks for (``X-M3-Agent``, ``X-M3-User``) and its version
(``X-M3-Version``); the engine trusts these because only the socket's owner can connect (mode 0600 in a
0700 folder), as the local OS user is trusted with the store's files anyway.
"""

from __future__ import annotations

import http.client
import json
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
