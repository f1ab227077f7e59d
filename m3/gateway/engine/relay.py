"""Bare ``m3`` with the engine: MCP on stdio whose tool calls run in the store's engine.

This process speaks MCP's JSON-RPC itself (:mod:`m3.gateway.engine.jsonrpc`), without the MCP SDK's server:
per relayed call that server cost more CPU than the engine's whole gateway (docs/benchmarks.md, "One engine
per store"), and every agent on the machine runs one of these. What it serves (the handshake era of MCP,
protocol versions 2024-11-05 to 2025-11-25):

* ``initialize`` (the client's version if this side speaks it, else the newest it does; capabilities
  ``tools.listChanged``), ``notifications/initialized``, ``ping``;
* ``tools/list`` from the manifest: the startup tools plus the domains this session loaded;
* ``tools/call`` relayed to the engine's ``POST /v1/tools/{name}`` as the configured agent, over a kept-alive
  connection, on a thread of its own (a parked ``notifications_wait`` does not hold up other calls); the
  answer is a ``CallToolResult`` with the body as JSON text and as ``structuredContent``, ``isError`` for an
  m3 error. An unknown tool is a protocol error (invalid params), as in the embedded server;
* after ``tools_load_domain``, ``notifications/tools/list_changed`` (before the call's answer);
* ``notifications/cancelled``: the call's connection to the engine is closed (the engine drops a parked wait)
  and no answer is sent;
* anything else: the JSON-RPC errors (parse error, invalid request, method not found).

A client on the newer stateless era (``server/discover``) gets "method not found" and falls back to the
handshake, as the SDK client does. The session ends when the client closes stdin, or on SIGTERM.
"""

from __future__ import annotations

import contextlib
import gc
import json
import signal
import socket
import sys
import threading
from collections.abc import Callable
from typing import Any

from m3 import __version__
from m3.config import Config
from m3.errors import M3Error
from m3.gateway.engine import manifest
from m3.gateway.engine.calls import caller_headers, relay
from m3.gateway.engine.client import Connections
from m3.gateway.engine.jsonrpc import INVALID_PARAMS, Inflight, Peer, RpcError
from m3.gateway.engine.paths import engine_paths
from m3.gateway.engine.spawn import ensure_engine

#: The handshake-era protocol versions this front-end speaks, oldest to newest.
PROTOCOL_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
#: Calls parked in the engine at once (each holds a thread here while it waits, e.g. notifications_wait).
_MAX_CALLS = 64


def mcp_tool(entry: dict[str, Any]) -> dict[str, Any]:
    """A manifest entry as an MCP ``Tool``."""
    return {"name": entry["name"], "description": entry["description"], "inputSchema": entry["input_schema"],
            "outputSchema": entry["output_schema"],
            "annotations": {"readOnlyHint": entry["read_only"], "destructiveHint": entry["destructive"]}}


def tool_result(body: Any, *, is_error: bool = False) -> dict[str, Any]:
    """An MCP ``CallToolResult``: ``body`` as JSON text and as structured content."""
    return {"content": [{"type": "text", "text": json.dumps(body, ensure_ascii=False)}],
            "structuredContent": body, "isError": is_error}


class Relay:
    """The MCP methods of one stdio session over ``tools`` (the manifest), relaying calls to the engine."""

    def __init__(self, config: Config, tools: dict[str, Any], connections: Connections):
        self._config = config
        self._entries: dict[str, dict[str, Any]] = {t["name"]: t for t in tools["tools"]}
        self._listed: dict[str, dict[str, Any]] = {n: t for n, t in self._entries.items() if t["startup"]}
        self._instructions: str | None = tools.get("instructions")
        self._headers = caller_headers(config)
        self._paths = engine_paths(config)
        self._connections = connections
        self._lock = threading.Lock()  # guards _listed (tools/list on the reader, tools_load_domain on a call's thread)
        self.peer: Peer | None = None

    def serve(self, reader: Any, writer: Any) -> None:
        """Serve the session on ``reader``/``writer`` (binary) until the client closes ``reader``."""
        self.peer = Peer(reader, writer, max_slow=_MAX_CALLS,
                         handlers={"initialize": self.initialize, "ping": lambda _p: {},
                                   "tools/list": self.list_tools},
                         slow={"tools/call": self.call_tool},
                         notified={"notifications/initialized": lambda _p: None})
        self.peer.serve()

    def initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        asked = params.get("protocolVersion")
        version = asked if asked in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[-1]
        result: dict[str, Any] = {"protocolVersion": version, "capabilities": {"tools": {"listChanged": True}},
                                  "serverInfo": {"name": "m3", "version": __version__}}
        if self._instructions:
            result["instructions"] = self._instructions
        return result

    def list_tools(self, params: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            listed = list(self._listed.values())
        return {"tools": [mcp_tool(t) for t in listed]}

    def call_tool(self, params: dict[str, Any], inflight: Inflight) -> dict[str, Any]:
        name = params.get("name")
        args = params.get("arguments") or {}
        if not isinstance(name, str) or name not in self._entries:
            raise RpcError(INVALID_PARAMS, f"unknown tool {name!r}. Call m3_index to list every tool.")
        if not isinstance(args, dict):
            raise RpcError(INVALID_PARAMS, "tools/call arguments must be an object")

        def watch(sock: socket.socket) -> Callable[[], None]:
            return inflight.when_cancelled(lambda: _abort(sock))

        try:
            status, body = relay(self._config, name, args, headers=self._headers, paths=self._paths,
                                 connections=self._connections, watch=watch)
        except M3Error as exc:
            return tool_result({"error": exc.to_dict()}, is_error=True)
        if status != 200 or not isinstance(body, dict):
            return tool_result(body if isinstance(body, dict) else {"error": {"code": "internal_error"}},
                               is_error=True)
        if name == "tools_load_domain":
            body = self._load_domain(body)
        return tool_result(body)

    def _load_domain(self, body: dict[str, Any]) -> dict[str, Any]:
        """List the loaded domain's tools in this session; tell the client when that changed the list."""
        with self._lock:
            added = {n: t for n, t in self._entries.items() if t["domain"] == body["domain"] and n not in self._listed}
            self._listed.update(added)
        if added and self.peer is not None:
            self.peer.notify("notifications/tools/list_changed")
        return {**body, "registered": list(added)}


def _abort(sock: socket.socket) -> None:
    """End a call's request to the engine: the engine sees the client gone, the waiting thread is freed."""
    with contextlib.suppress(OSError):  # already closed: the call has finished
        sock.shutdown(socket.SHUT_RDWR)


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def prepare_stdio() -> None:
    """What every stdio MCP server of m3 does first: hosts end it by closing stdin, then SIGTERM after a grace
    period, so SIGTERM becomes a clean exit; on a terminal, say what this is."""
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    if sys.stdin.isatty():
        print("m3: serving MCP on stdin/stdout for an MCP client; press Ctrl-D to stop. "
              "Commands: `m3 --help`.", file=sys.stderr)


def serve_stdio(config: Config) -> None:
    """Serve MCP on stdin/stdout until the client closes stdin, relaying to the engine (started now)."""
    prepare_stdio()
    paths = engine_paths(config)
    ensure_engine(config, paths)  # now, not at the first call: a client's first call should not wait for it
    connections = Connections(paths.sock)
    session = Relay(config, manifest.ensure(paths.manifest), connections)
    gc.collect()
    gc.freeze()  # what start-up built lives as long as the session: keep it out of full collections' scans
    try:
        session.serve(sys.stdin.buffer, sys.stdout.buffer)
    finally:
        connections.close()
