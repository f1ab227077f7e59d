"""memory_unlink: the inverse of memory_link (the memory domain)."""

from __future__ import annotations

from pydantic import Field

from m3.protocols.base import ToolArgs, ToolResult, ToolSpec
from m3.protocols.messages import memory as msg
from m3.protocols.tools.fields import MemoryId, RelationType


class MemoryUnlinkArgs(ToolArgs):
    from_id: MemoryId = Field(description="The memory the relationship starts at; it must be yours.")
    to_id: MemoryId
    type: RelationType | None = Field(None, description="Only this kind of relationship; default every kind.")


class MemoryUnlinkResult(ToolResult):
    from_id: str
    to_id: str
    removed: list[str] = Field(description="The kinds of relationship removed; empty when there was none.")


MEMORY_UNLINK = ToolSpec(
    name="memory_unlink", domain="memory", args=MemoryUnlinkArgs, result=MemoryUnlinkResult, destructive=True,
    message=msg.UnlinkMemories, actor="writer",
    description=(
        "Remove a relationship recorded with memory_link that turned out wrong (two memories that are not "
        "related after all, a contradiction that was resolved). Both memories stay; the removal is kept in the "
        "first memory's history. Only the owner of the first memory may remove its links."
    ),
)

LINK_TOOLS: tuple[ToolSpec, ...] = (MEMORY_UNLINK,)
