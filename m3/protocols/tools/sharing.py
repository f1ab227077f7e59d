"""Arguments, results and declarations of the tools that share a private memory with named agents."""

from __future__ import annotations

from pydantic import Field

from m3.protocols.base import ToolArgs, ToolResult, ToolSpec
from m3.protocols.messages import memory as msg
from m3.protocols.tools.fields import Identifier, MemoryId


class MemoryShareArgs(ToolArgs):
    id: MemoryId = Field(description="One of your own scope=agent memories.")
    agents: list[Identifier] = Field(min_length=1, max_length=100, description="The agents, by id.")


class MemoryShareResult(ToolResult):
    id: str
    changed: list[str] = Field(description="The agents this call gave (or took away) access.")
    shared_with: list[str] = Field(description="Every agent the memory is shared with now.")


MEMORY_SHARE = ToolSpec(
    name="memory_share", domain="memory", args=MemoryShareArgs, result=MemoryShareResult,
    message=msg.ShareMemory, actor="writer",
    description=(
        "Let named agents read one of your private (scope=agent) memories: with isolation on nobody else sees "
        "it otherwise. They find it in search, memory_get, history, graph, handoffs and task results. Only the "
        "memory's owner may share it; the change is kept in memory_history. For something every agent should "
        "know, write it with scope 'user' or 'org' instead."
    ),
)
MEMORY_UNSHARE = ToolSpec(
    name="memory_unshare", domain="memory", args=MemoryShareArgs, result=MemoryShareResult,
    message=msg.UnshareMemory, actor="writer",
    description="Stop sharing one of your private memories with the named agents (see memory_share).",
)

SHARING_TOOLS: tuple[ToolSpec, ...] = (MEMORY_SHARE, MEMORY_UNSHARE)
