"""memory domain tools that work on many memories at once: write a batch, list, count."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from m3.protocols.base import ToolArgs, ToolResult, ToolSpec
from m3.protocols.messages import listing as msg
from m3.protocols.tools.fields import Identifier, MemoryType, Scope, Timestamp
from m3.protocols.tools.memory import MemoryRecord, MemoryWriteArgs, MemoryWriteResult

#: Most memories one memory_write_bulk call writes (one transaction).
MAX_BULK = 500
#: Most memories one memory_list page shows.
MAX_LIST_PAGE = 200


class MemoryWriteBulkArgs(ToolArgs):
    memories: list[MemoryWriteArgs] = Field(min_length=1, max_length=MAX_BULK, description=(
        f"The memories to store, each with the fields of memory_write; at most {MAX_BULK}."))


class MemoryWriteBulkResult(ToolResult):
    count: int = Field(description="How many memories were given.")
    created: int = Field(description="How many were new; the others matched an identical current memory.")
    items: list[MemoryWriteResult] = Field(description="One result per given memory, in the order given.")


MEMORY_WRITE_BULK = ToolSpec(
    name="memory_write_bulk", domain="memory", args=MemoryWriteBulkArgs, result=MemoryWriteBulkResult,
    description=(
        "Store many memories in one call and one transaction: all of them or, on any invalid item, none. Use it "
        "to import notes, facts or a finished session's decisions at once instead of calling memory_write in a "
        "loop; each item takes memory_write's fields and follows its rules (identical current memories are not "
        "duplicated, a new version of a fact retires the old one)."
    ),
)


class MemoryListArgs(ToolArgs):
    type: MemoryType | None = Field(None, description="Only memories of this type.")
    agent_id: Identifier | None = Field(None, description="Only memories owned by this agent.")
    user_id: Identifier | None = Field(None, description="Only memories about this user.")
    scope: Scope | None = Field(None, description="Only memories of this scope.")
    conversation_id: Identifier | None = Field(None, description="Only memories from this conversation.")
    include_retired: bool = Field(False, description="Also list retired (superseded, deleted) versions.")
    include_archived: bool = Field(False, description=(
        "Also list archived memories (decayed or expired); include_retired lists them as well."))
    limit: int = Field(50, ge=1, le=MAX_LIST_PAGE, description=f"How many per page; at most {MAX_LIST_PAGE}.")
    before: int | None = Field(None, ge=1, le=2**63 - 1, description=(
        "The next_before of the previous page, to read on from there."))


class MemoryListResult(ToolResult):
    count: int
    items: list[MemoryRecord] = Field(description="Newest first.")
    next_before: int | None = Field(description="Pass as before for the next page; null when this was the last.")


MEMORY_LIST = ToolSpec(
    name="memory_list", domain="memory", args=MemoryListArgs, result=MemoryListResult, read_only=True,
    message=msg.ListMemories, actor="searcher",
    description=(
        "Browse memories newest first without a query, a page at a time, optionally of one type, agent, user, "
        "scope or conversation. Use it to review what was stored recently or to walk through everything of a "
        "kind (all decisions, all preferences); use memory_search instead when you are looking for something."
    ),
    audit=lambda res: (('memory', item.id) for item in res.items),
)


class MemoryStatsArgs(ToolArgs):
    agent_id: Identifier | None = Field(None, description="Only memories owned by this agent.")
    user_id: Identifier | None = Field(None, description="Only memories about this user.")


class MemoryStatsResult(ToolResult):
    current: int = Field(description="Current memories you can see.")
    retired: int = Field(description="Retired versions (superseded, corrected or deleted) you can see.")
    pinned: int
    archived: int = Field(0, description="Current memories archived by decay or expiry (not counted as current).")
    by_type: dict[str, int] = Field(description="Current memories per type.")
    by_scope: dict[Literal["agent", "user", "org"], int] = Field(description="Current memories per scope.")
    oldest: Timestamp | None = Field(description="When the oldest current memory was recorded.")
    newest: Timestamp | None = Field(description="When the newest current memory was recorded.")


MEMORY_STATS = ToolSpec(
    name="memory_stats", domain="memory", args=MemoryStatsArgs, result=MemoryStatsResult, read_only=True,
    message=msg.CountMemories, actor="searcher",
    description=(
        "Count the memories you can see: current and retired, pinned, per type and per scope, with the oldest "
        "and newest times. Use it to get a picture of what memory holds before browsing (memory_list) or to "
        "check that an import arrived; it shows no content."
    ),
)

MEMORY_LIST_TOOLS: tuple[ToolSpec, ...] = (MEMORY_WRITE_BULK, MEMORY_LIST, MEMORY_STATS)
