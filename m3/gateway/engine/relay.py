"""Bare ``m3`` with the engine: an MCP server on stdio whose tool calls run in the store's engine.

The tool list comes from the manifest (no registry, SQLAlchemy or actors in this process); each call goes to
``POST /v1/tools/{name}`` as the configured agent, the engine started on first use. ``tools_load_domain``
runs in the engine (an unknown domain is its error) and adds the domain's tools to this session's list here,
with ``tools/list_changed``. An unknown tool is a protocol error, as in the embedded server.
"""

from __future__ import annotations

import json
import signal
import sys
from typing import Any

import anyio
import anyio.to_thread
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.lowlevel import NotificationOptions
from mcp.server.models import InitializationOptions
from mcp.shared.exceptions import MCPError

from m3 import __version__
from m3.config import Config
from m3.errors import M3Error
from m3.gateway.engine import manifest
from m3.gateway.engine.calls import caller_headers, relay
from m3.gateway.engine.client import Connections
from m3.gateway.engine.paths import engine_paths
from m3.gateway.engine.spawn import ensure_engine

#: Calls parked in the engine at once (each holds a thread here while it waits, e.g. notifications_wait).
_MAX_CALLS = 64


class RelayServer(Server[Any]):
    """Advertises ``tools.listChanged``, as the embedded server does."""

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or NotificationOptions(tools_changed=True), experimental_capabilities, extensions
        )


def _mcp_tool(entry: dict[str, Any]) -> types.Tool:
    return types.Tool(
        name=entry["name"], description=entry["description"], input_schema=entry["input_schema"],
        output_schema=entry["output_schema"],
        annotations=types.ToolAnnotations(read_only_hint=entry["read_only"], destructive_hint=entry["destructive"]),
    )


def _result(body: dict[str, Any], *, is_error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=json.dumps(body, ensure_ascii=False))],
                                structured_content=body, is_error=is_error)


def build_relay(config: Config, tools: dict[str, Any], connections: Connections | None = None) -> RelayServer:
    """A stdio-side MCP server over ``tools`` (the manifest) relaying every call to the engine (over
    ``connections``, kept alive, when given)."""
    entries: dict[str, dict[str, Any]] = {t["name"]: t for t in tools["tools"]}
    listed: dict[str, dict[str, Any]] = {n: t for n, t in entries.items() if t["startup"]}
    headers = caller_headers(config)
    paths = engine_paths(config)
    limiter = anyio.CapacityLimiter(_MAX_CALLS)

    async def list_tools(ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
                         ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[_mcp_tool(t) for t in listed.values()])

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name not in entries:
            raise MCPError(code=types.INVALID_PARAMS,
                           message=f"unknown tool {params.name!r}. Call m3_index to list every tool.")
        args = dict(params.arguments or {})
        try:
            status, body = await anyio.to_thread.run_sync(
                lambda: relay(config, params.name, args, headers=headers, paths=paths, connections=connections),
                limiter=limiter,
                abandon_on_cancel=True)
        except M3Error as exc:
            return _result({"error": exc.to_dict()}, is_error=True)
        if status != 200 or not isinstance(body, dict):
            return _result(body if isinstance(body, dict) else {"error": {"code": "internal_error"}}, is_error=True)
        if params.name == "tools_load_domain":
            added = {name: t for name, t in entries.items() if t["domain"] == body["domain"] and name not in listed}
            listed.update(added)
            body = {**body, "registered": list(added)}
            if added:
                await ctx.session.send_tool_list_changed()
        return _result(body)

    def input_schema(name: str) -> dict[str, Any] | None:
        entry = entries.get(name)
        return entry["input_schema"] if entry is not None else None

    return RelayServer("m3", version=__version__, instructions=tools.get("instructions"),
                       get_tool_input_schema=input_schema, on_list_tools=list_tools, on_call_tool=call_tool)


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
    from mcp.server.stdio import stdio_server

    prepare_stdio()
    paths = engine_paths(config)
    ensure_engine(config, paths)  # now, not at the first call: a client's first call should not wait for it
    connections = Connections(paths.sock)
    server = build_relay(config, manifest.ensure(paths.manifest), connections)

    async def main() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    try:
        anyio.run(main, backend="trio")
    finally:
        connections.close()
