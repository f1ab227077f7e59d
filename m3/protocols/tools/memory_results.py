"""Results of the ``memory`` domain tools: what the Writer and the Searcher answer, as the caller gets it.

Apart from :mod:`m3.protocols.tools.memory` (the arguments and declarations) because the actor
requests in :mod:`m3.protocols.messages.memory` name these as their replies.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from m3.protocols.base import ToolResult
from m3.protocols.tools.fields import Scope, Timestamp


class MemoryRecord(ToolResult):
    """A memory as stored, with both time axes."""

    id: str
    type: str
    title: str | None
    content: str
    metadata: dict[str, Any]
    scope: Scope
    agent_id: str | None
    user_id: str | None
    importance: float
    pinned: bool
    expires_at: Timestamp | None
    content_hash: str
    access_count: int
    last_accessed_at: Timestamp | None
    conversation_id: str | None
    source: str | None
    valid_from: Timestamp
    valid_to: Timestamp | None
    recorded_at: Timestamp
    retired_at: Timestamp | None
    retire_reason: str | None
    superseded_by: str | None


class MemoryWriteResult(ToolResult):
    id: str
    created: bool = Field(description="False when an identical current memory existed; its id is returned.")
    content_hash: str
    recorded_at: Timestamp
    embedding: Literal["pending", "ready"]


class SearchItem(ToolResult):
    id: str
    content: str
    title: str | None
    type: str
    importance: float
    bm25_score: float = Field(description="Raw BM25 keyword score of the content; 0 when no query word matches.")
    score: float = Field(description="Fused relevance in 0..1; the value to grade results by.")
    agent_id: str | None
    conversation_id: str | None
    metadata: dict[str, Any]
    valid_from: Timestamp
    recorded_at: Timestamp
    retired_at: Timestamp | None
    explanation: dict[str, Any] | None = Field(
        None, exclude_if=lambda v: v is None, description="Every ranking signal with its weight (explain=true)."
    )


class MemorySearchResult(ToolResult):
    count: int
    items: list[SearchItem]
    query: str
    grade_with: str = Field(description="The item field that orders relevance (always 'score').")


class MemorySupersedeResult(ToolResult):
    id: str = Field(description="The new current memory.")
    superseded_id: str
    recorded_at: Timestamp


class MemoryDeleteResult(ToolResult):
    id: str
    deleted: Literal["soft", "hard"]


class MemoryPinResult(ToolResult):
    id: str
    pinned: bool


class HistoryEvent(ToolResult):
    memory_id: str
    event: str
    actor: str | None
    at: Timestamp
    details: dict[str, Any]


class MemoryHistoryResult(ToolResult):
    id: str
    versions: list[str] = Field(description="The supersession chain, oldest first, this memory included.")
    events: list[HistoryEvent]


class MemoryLinkResult(ToolResult):
    from_id: str
    to_id: str
    type: str
    created: bool


class GraphNode(ToolResult):
    id: str
    title: str | None
    type: str
    current: bool


class GraphEdge(ToolResult):
    from_id: str
    to_id: str
    type: str


class MemoryGraphResult(ToolResult):
    nodes: list[GraphNode]
    edges: list[GraphEdge]


class MemoryVerifyResult(ToolResult):
    checked: int
    ok: int
    mismatched: list[str]
