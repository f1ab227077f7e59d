"""Arguments, results and declarations of the ``conflicts`` domain tools.

A conflict is a pair of current memories that look alike but disagree:
``near_duplicate`` when their cosine is above ``supersede.threshold`` but
they differ on an anchor (a number, date, amount, identifier or name), so
similarity supersession kept both; ``contradiction`` when the Reflector
(the cognitive loop's ``reflect`` pass) found two similar memories of one
owner that disagree on a negation, a number, a date, an amount, the value
of one attribute or a name in a first-person note; ``duplicate`` when the
Reflector found two memories of one owner that say the same fact in other
words, every anchor agreeing (docs/cognitive-loop.md, "Reflector").
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from m3.protocols.base import ToolArgs, ToolResult, ToolSpec
from m3.protocols.messages.conflicts import ListConflicts, ResolveConflict
from m3.protocols.tools.fields import Content, Identifier, MemoryId, Timestamp

ConflictKind = Literal["near_duplicate", "contradiction", "duplicate"]
Resolution = Literal["keep_both", "keep_a", "keep_b", "merge"]


class ConflictRecord(ToolResult):
    id: str
    memory_a: str = Field(description="The older memory of the pair.")
    memory_b: str = Field(description="The newer memory of the pair.")
    kind: str
    reason: str = Field(description="What differs, e.g. 'number: 4411 vs 4412'.")
    details: dict[str, Any]
    similarity: float | None = Field(description="Cosine of the two memories' vectors.")
    status: str = Field(description="open or resolved.")
    resolution: str | None
    detected_at: Timestamp
    resolved_at: Timestamp | None
    resolved_by: str | None
    scope: str
    agent_id: str | None
    user_id: str | None
    merged_into: str | None = Field(None, description="The memory that replaced both (resolution merge).")


class ConflictsListArgs(ToolArgs):
    status: Literal["open", "resolved", "all"] = Field("open", description="Which conflicts; default the open ones.")
    kind: ConflictKind | None = Field(None, description="Only this kind.")
    memory_id: MemoryId | None = Field(None, description="Only pairs that involve this memory (full id).")
    agent_id: Identifier | None = Field(None, description="Only pairs of memories owned by this agent.")
    user_id: Identifier | None = Field(None, description="Only pairs of memories about this user.")
    limit: int = Field(50, ge=1, le=500)


class ConflictsListResult(ToolResult):
    count: int
    items: list[ConflictRecord]


CONFLICTS_LIST = ToolSpec(
    name="conflicts_list", domain="conflicts", args=ConflictsListArgs, result=ConflictsListResult, read_only=True,
    message=ListConflicts, actor="directory",
    description=(
        "List pairs of memories that look alike but neither replaced the other: near_duplicate (a number, date, "
        "amount, identifier or name differs, e.g. two customers' orders), contradiction (found by the background "
        "Reflector: one says what the other denies, or a number, date, amount, attribute value or a name in a "
        "first-person note changed, e.g. 'I have 2 cats' / 'I have 3 cats') or duplicate (found by the "
        "Reflector: the same fact in other words, every number, date, identifier and name the same). Each names "
        "both memories, what differs and how similar they are; settle one with conflicts_resolve."
    ),
)


class ConflictsResolveArgs(ToolArgs):
    id: Identifier = Field(description="The conflict's id (from conflicts_list).")
    resolution: Resolution = Field(description=(
        "keep_both: they are distinct facts; keep_a: memory_a is right and memory_b is retired in its favour; "
        "keep_b: memory_b replaces memory_a (e.g. a value that changed); merge: write content as a new memory "
        "that replaces both."))
    content: Content | None = Field(None, description="Only with merge: the merged memory, stored as given.")
    title: str | None = Field(None, max_length=500, description="Only with merge: its title (default memory_b's).")


CONFLICTS_RESOLVE = ToolSpec(
    name="conflicts_resolve", domain="conflicts", args=ConflictsResolveArgs, result=ConflictRecord,
    destructive=True, message=ResolveConflict, actor="writer",
    description=(
        "Settle a conflict found by conflicts_list: keep_both when the two memories are distinct facts, keep_a / "
        "keep_b to retire the other one in favour of the kept one, or merge with content to replace both by one "
        "new memory that says what is true now (merged_into names it). Retiring is recorded as a supersession, "
        "so memory_history and as_of still show the old memories."
    ),
)

CONFLICT_TOOLS: tuple[ToolSpec, ...] = (CONFLICTS_LIST, CONFLICTS_RESOLVE)
