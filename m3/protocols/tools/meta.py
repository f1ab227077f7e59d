"""Tools about the tools (``tools`` domain) and the embedder status."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from m3.protocols.base import ToolArgs, ToolResult, ToolSpec


class M3CallArgs(ToolArgs):
    tool: str = Field(min_length=1, description="Name of any m3 tool, e.g. memory_pin.")
    args: dict[str, Any] = Field(default_factory=dict, description="The tool's arguments as a JSON object.")


class M3CallResult(ToolResult):
    tool: str
    result: dict[str, Any]


M3_CALL = ToolSpec(
    name="m3_call", domain="tools", args=M3CallArgs, result=M3CallResult, startup=True,
    description=(
        "Call any m3 tool by name, including the ones not loaded into this session (pins, history, links, "
        "graph, chat log, handoffs and inbox, shared tasks, agents, notifications, embedder status …). Call "
        "m3_index first to see the names and their arguments."
    ),
)


class M3IndexArgs(ToolArgs):
    domain: str | None = Field(None, description="Only this domain.")


class ToolEntry(ToolResult):
    name: str
    domain: str
    description: str
    destructive: bool
    arguments: dict[str, Any]


class M3IndexResult(ToolResult):
    tools: list[ToolEntry]


M3_INDEX = ToolSpec(
    name="m3_index", domain="tools", args=M3IndexArgs, result=M3IndexResult, read_only=True,
    description="List every m3 tool with its description and argument schema, to use with m3_call.",
)


class NoArgs(ToolArgs):
    """Arguments of a tool that takes none."""


class DomainEntry(ToolResult):
    domain: str
    tools: list[str]


class ToolsListDomainsResult(ToolResult):
    domains: list[DomainEntry]


TOOLS_LIST_DOMAINS = ToolSpec(
    name="tools_list_domains", domain="tools", args=NoArgs, result=ToolsListDomainsResult,
    read_only=True,
    description="List the tool domains (memory, chatlog, tools, embedder …) and the tools in each.",
)


class ToolsLoadDomainArgs(ToolArgs):
    domain: str = Field(min_length=1)


class ToolsLoadDomainResult(ToolResult):
    domain: str
    registered: list[str] = Field(description="Tools newly added to this session's tool list.")


TOOLS_LOAD_DOMAIN = ToolSpec(
    name="tools_load_domain", domain="tools", args=ToolsLoadDomainArgs, result=ToolsLoadDomainResult,
    description=(
        "Add every tool of a domain to this session's tool list (the client is notified), when you will use "
        "them often; otherwise m3_call reaches them without loading."
    ),
)


class EmbedderStatusResult(ToolResult):
    backend: str
    model: str = Field(description="The configured model: new vectors are computed with it.")
    dim: int | None = Field(description="Its dimension (null while an HTTP endpoint cannot be asked).")
    loaded: bool
    pending: int = Field(description="Current memories without a vector of the configured model.")
    vectors_by_model: dict[str, int]
    memories: int
    active_model: str = Field(description="The model whose vectors search uses; differs from model while "
                                          "re-embedding.")
    reembedding: bool = Field(description="True while the store moves to the configured model.")
    queued: int = Field(description="Memories queued for embedding in this process.")
    last_error: str | None = Field(description="Why the last embedding failed, if it did.")
    server: dict[str, Any] | None = Field(
        description="With a shared embed server: its url, state (server or in_process) and texts per route.")


EMBEDDER_STATUS = ToolSpec(
    name="embedder_status", domain="embedder", args=NoArgs, result=EmbedderStatusResult,
    read_only=True,
    description=(
        "Show the embedding backend and model, the model search uses, how many memories have vectors of each "
        "model and how many wait, and whether a shared embed server answers. Use it when search by meaning "
        "misses fresh memories or after changing embed.model."
    ),
)

class M3HelpArgs(ToolArgs):
    tool: str = Field(min_length=1, max_length=200, description="The tool to describe, e.g. memory_search.")


class FieldHelp(ToolResult):
    name: str
    type: str = Field(description="Its JSON type, e.g. string, integer, array of string, string or null.")
    required: bool
    default: Any = Field(None, description="Its default when left out (arguments only).")
    description: str | None = None


class ErrorHelp(ToolResult):
    code: str
    when: str


class M3HelpResult(ToolResult):
    name: str
    domain: str
    description: str
    read_only: bool
    destructive: bool
    startup: bool = Field(description="Registered with MCP at start-up; otherwise reach it with m3_call.")
    arguments: list[FieldHelp]
    result: list[FieldHelp]
    errors: list[ErrorHelp] = Field(description="The error codes it can end with and when (docs/errors.md).")
    example: dict[str, Any] = Field(description="A call with every required argument: {tool, args}, for m3_call.")
    cli: str = Field(description="The same call on the command line.")


M3_HELP = ToolSpec(
    name="m3_help", domain="tools", args=M3HelpArgs, result=M3HelpResult, read_only=True,
    description=(
        "Describe one m3 tool in full: every argument with its type, default and meaning, the fields of its "
        "result, whether it is destructive, the error codes it can raise, and an example call (for m3_call and "
        "the command line). Use it before calling a tool you have not used, or when a call failed on its "
        "arguments."
    ),
)

META_TOOLS: tuple[ToolSpec, ...] = (M3_CALL, M3_INDEX, TOOLS_LIST_DOMAINS, TOOLS_LOAD_DOMAIN, EMBEDDER_STATUS,
                                    M3_HELP)
