"""The MCP surface (official SDK, low-level ``Server``) over the tool registry, on trio.

The specs marked ``startup`` are listed at start; ``m3_call`` reaches every other tool and
``tools_load_domain`` adds a domain's tools to the calling agent's list (``tools/list_changed``). Errors come
back as tool results with ``isError`` and the CLI's error body; only an unknown tool is a protocol error.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.lowlevel import NotificationOptions
from mcp.server.models import InitializationOptions
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp.shared.exceptions import MCPError

from m3 import __version__
from m3.config import Config
from m3.errors import M3Error, UnknownTool
from m3.gateway.registry import Tool
from m3.gateway.service import CallContext, Service

log = logging.getLogger(__name__)

INSTRUCTIONS = (
    "m3 is your long-term memory, shared with other agents. Search it (memory_search) before answering "
    "questions about the user, the project or past decisions; store what should outlast this session "
    "(memory_write); correct facts with memory_supersede. m3_index lists every further tool, reachable "
    "through m3_call. Working with other agents: check memory_inbox for work handed to you, hand work on "
    "with memory_handoff, take shared tasks with task_claim, and wait for news with notifications_wait "
    "(tools_load_domain 'task', 'notifications' or 'agent' lists them)."
)

IdentityFn = Callable[[ServerRequestContext[Any]], CallContext]


class M3Server(Server[Any]):
    """A low-level server whose default initialisation advertises ``tools.listChanged``.

    The SDK's in-memory and HTTP transports build the options without
    arguments, which would advertise ``listChanged: false``.
    """

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or NotificationOptions(tools_changed=True), experimental_capabilities, extensions
        )


def mcp_tool(tool: Tool) -> types.Tool:
    spec = tool.spec
    return types.Tool(
        name=spec.name, description=spec.description, input_schema=tool.input_schema,
        output_schema=tool.output_schema,
        annotations=types.ToolAnnotations(read_only_hint=spec.read_only, destructive_hint=spec.destructive),
    )


def tool_result(body: dict[str, Any], *, is_error: bool = False) -> types.CallToolResult:
    """``body`` both as JSON text and as structured content."""
    return types.CallToolResult(content=[types.TextContent(type="text", text=json.dumps(body, ensure_ascii=False))],
                                structured_content=body, is_error=is_error)


def failure(error: M3Error) -> types.CallToolResult:
    return tool_result({"error": error.to_dict()}, is_error=True)


def build_server(service: Service, identity: IdentityFn) -> M3Server:
    """An MCP server over ``service``; ``identity`` says who each request acts as."""
    registry = service.registry
    startup: dict[str, Tool] = {t.spec.name: t for t in registry if t.spec.startup}
    # Each agent has its own list: one agent loading a domain over remote MCP must not change the tools
    # another agent sees. (Sessions of one agent share it: the SDK gives handlers no public handle on the
    # connection, and a modern-era client has no lasting session anyway.)
    by_agent: dict[str | None, dict[str, Tool]] = {}
    bus = InMemorySubscriptionBus()

    def listed_for(ctx: ServerRequestContext[Any]) -> dict[str, Tool]:
        return by_agent.setdefault(identity(ctx).agent_id, dict(startup))

    async def list_tools(ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
                         ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[mcp_tool(t) for t in listed_for(ctx).values()])

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        try:
            registry.get(params.name)
        except UnknownTool as exc:
            raise MCPError(code=types.INVALID_PARAMS, message=f"{exc.message}. {exc.hint}") from None

        async def load_domain(domain: str) -> list[str]:
            listed = listed_for(ctx)
            added = {t.spec.name: t for t in registry.domain(domain) if t.spec.name not in listed}
            listed.update(added)
            if added:
                await ctx.session.send_tool_list_changed()
                await bus.publish(ToolsListChanged())
            return list(added)

        try:
            call_ctx = replace(identity(ctx), load_domain=load_domain)
            return tool_result(await service.call(params.name, params.arguments, call_ctx))
        except M3Error as exc:
            return failure(exc)
        except Exception:  # never let an internal message escape as a protocol error
            log.exception("MCP call %s failed", params.name)
            return failure(M3Error(f"{params.name} failed unexpectedly"))

    def input_schema(name: str) -> dict[str, Any] | None:
        try:
            return registry.get(name).input_schema
        except UnknownTool:
            return None

    return M3Server(
        "m3", version=__version__, instructions=INSTRUCTIONS, get_tool_input_schema=input_schema,
        on_list_tools=list_tools, on_call_tool=call_tool, on_subscriptions_listen=ListenHandler(bus),
    )


def local_identity(config: Config) -> IdentityFn:
    """stdio and in-process callers act as the configured agent."""
    agent = config["identity.agent_id"] or None
    user = config["identity.user_id"] or None

    def identity(_ctx: ServerRequestContext[Any]) -> CallContext:
        return CallContext(agent_id=agent, user_id=user)

    return identity


def serve_stdio(config: Config) -> None:
    """Serve MCP on stdin/stdout until the client closes stdin."""
    import anyio
    from mcp.server.stdio import stdio_server

    from m3.gateway.engine.relay import prepare_stdio
    from m3.gateway.runtime import running

    prepare_stdio()  # SIGTERM exits cleanly, so the actors still stop in order
    with running(config, long_lived=True) as service:
        server = build_server(service, local_identity(config))

        async def main() -> None:
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())

        anyio.run(main, backend="trio")
