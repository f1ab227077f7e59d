"""memory_unconsolidate: the undo of belief roll-up (the memory domain; docs/cognitive-loop.md)."""

from __future__ import annotations

from pydantic import Field

from m3.protocols.base import ToolArgs, ToolResult, ToolSpec
from m3.protocols.messages import rollup as msg
from m3.protocols.tools.fields import MemoryId, Timestamp


class MemoryUnconsolidateArgs(ToolArgs):
    id: MemoryId = Field(description="A current belief written by the roll-up pass; it must be yours.")
    reason: str | None = Field(None, max_length=1000, description="Why the summary is wrong; kept in history.")
    allow_again: bool = Field(False, description="Let the roll-up pass summarise the same notes again later; "
                                                 "by default it never rolls this cluster up again.")


class MemoryUnconsolidateResult(ToolResult):
    id: str = Field(description="The belief, now retired (memory_history still shows it).")
    sources: list[str] = Field(description="The notes it consolidated: unchanged, still current and findable.")
    retired_at: Timestamp
    allow_again: bool


MEMORY_UNCONSOLIDATE = ToolSpec(
    name="memory_unconsolidate", domain="memory", args=MemoryUnconsolidateArgs, result=MemoryUnconsolidateResult,
    destructive=True, message=msg.UnconsolidateMemory, actor="writer",
    description=(
        "Undo a belief that the background roll-up wrote from several of your notes, when the summary is wrong "
        "or unwanted. The belief is retired (kept in history, not erased) and its consolidates links are "
        "removed; the notes themselves stay exactly as they were. The roll-up does not summarise the same notes "
        "again unless allow_again=true."
    ),
)

CONSOLIDATION_TOOLS: tuple[ToolSpec, ...] = (MEMORY_UNCONSOLIDATE,)
