"""Arguments, results and declarations of the ``memory`` domain tools."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, computed_field, model_validator

from m3.errors import ConfirmationRequired
from m3.protocols.base import ToolArgs, ToolResult, ToolSpec
from m3.protocols.messages import memory as msg
from m3.protocols.tools.fields import (
    AsOf,
    CallerAgent,
    CallerUser,
    Content,
    Identifier,
    Importance,
    JsonObject,
    MemoryId,
    MemoryType,
    RelationType,
    ResultCount,
    Scope,
    Text,
    Timestamp,
    ValidAt,
)


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
    archived_at: Timestamp | None = Field(None, description=(
        "When the cognitive loop archived it (decay or expiry): hidden from default search and lists until "
        "memory_restore; never deleted."))
    archive_reason: Literal["decayed", "expired"] | None = Field(None, description="Why it was archived.")


class MemoryWriteArgs(ToolArgs):
    content: Content = Field(description="The memory, stored exactly as given.")
    type: MemoryType = Field("note", description="What kind of memory this is.")
    title: str | None = Field(None, max_length=500, description="A short label; matched as its own search signal.")
    metadata: JsonObject = Field(default_factory=dict, description="Any JSON object kept with the memory.")
    scope: Scope = Field("agent", description="agent: this agent's own; user: shared for one user; org: everyone.")
    agent_id: CallerAgent = Field(None, description="Owner agent; defaults to the calling agent.")
    user_id: CallerUser = Field(None, description="The person this memory is about or for.")
    importance: Importance = Field(0.5, description="0..1; raises the memory in search.")
    pinned: bool = Field(False, description="Pinned memories get a small search boost and never decay.")
    expires_at: Timestamp | None = Field(None, description="After this time the memory is no longer returned.")
    valid_from: Timestamp | None = Field(None, description="When the fact became true in the world; default now.")
    conversation_id: Identifier | None = Field(None, description="Conversation or session this came from.")
    source: str | None = Field(None, max_length=500, description="Where the memory came from (file, URL, tool).")


class MemoryWriteResult(ToolResult):
    id: str
    created: bool = Field(description="False when an identical current memory existed; its id is returned.")
    content_hash: str
    recorded_at: Timestamp
    embedding: Literal["pending", "ready"]


MEMORY_WRITE = ToolSpec(
    name="memory_write", domain="memory", args=MemoryWriteArgs, result=MemoryWriteResult, startup=True,
    message=msg.WriteMemory, actor="writer",
    description=(
        "Store a memory that should outlast this session: a fact, decision, preference, note or piece of "
        "conversation. Use it whenever you learn something the user or another agent will want later. "
        "Content is kept exactly as given and is searchable by keyword at once and by meaning within about a "
        "second. Writing a new version of a fact (same type and agent, nearly the same text) retires the old one "
        "automatically; history keeps both."
    ),
)


class MemorySearchArgs(ToolArgs):
    query: Text = Field(description="What you are looking for, in natural language or keywords.")
    k: ResultCount = None
    type: MemoryType | None = Field(None, description="Only memories of this type.")
    agent_id: Identifier | None = Field(None, description="Only memories owned by this agent.")
    user_id: Identifier | None = Field(None, description="Only memories about this user.")
    scope: Scope | None = Field(None, description="Only memories of this scope.")
    conversation_id: Identifier | None = Field(None, description="Only memories from this conversation.")
    as_of: AsOf = None
    valid_at: ValidAt = None
    explain: bool = Field(False, description="Return every ranking signal and its weight per item.")
    include_archived: bool = Field(False, description="Also find archived (decayed or expired) memories.")
    now: Timestamp | None = Field(None, description=(
        "When the question is asked (ISO 8601); default the current time. Times the query names ('10 days "
        "ago', 'last spring', 'in May') are read relative to it, and memories valid then rank higher."))


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
    archived_at: Timestamp | None = None
    explanation: dict[str, Any] | None = Field(
        None, exclude_if=lambda v: v is None, description="Every ranking signal with its weight (explain=true)."
    )


class MemorySearchResult(ToolResult):
    count: int
    items: list[SearchItem]
    query: str
    grade_with: str = Field(description="The item field that orders relevance (always 'score').")


MEMORY_SEARCH = ToolSpec(
    name="memory_search", domain="memory", args=MemorySearchArgs, result=MemorySearchResult, startup=True,
    message=msg.SearchMemories, actor="searcher", read_only=True,
    description=(
        "Find memories relevant to a question before answering it, or before storing something that might "
        "already be known. Hybrid search: meaning (local embeddings) plus keywords (BM25), then diversity. "
        "Filter by type, agent, user, scope or conversation; use as_of to see what was known at a past time "
        "and valid_at for what held at a past time; a time named in the query ('last week', 'in May 2023') favours "
        "memories of that time, read relative to now; explain=true shows how each score was made."
    ),
    audit=lambda res: (('memory', item.id) for item in res.items),
)


class MemoryGetArgs(ToolArgs):
    id: MemoryId
    as_of: AsOf = None
    valid_at: ValidAt = None


MEMORY_GET = ToolSpec(
    name="memory_get", domain="memory", args=MemoryGetArgs, result=MemoryRecord, startup=True, read_only=True,
    message=msg.GetMemory, actor="searcher",
    description=(
        "Read one memory in full by its id or a unique 8-character prefix of it, including retired versions. "
        "Use it after memory_search when you need the metadata, validity times or history links; with as_of "
        "or valid_at, the version of it that was current (or held) at that time."
    ),
    audit=lambda res: [('memory', res.id)],
)


class MemorySupersedeArgs(ToolArgs):
    id: MemoryId = Field(description="The memory that is no longer true.")
    content: Content = Field(description="The corrected memory.")
    title: str | None = Field(None, max_length=500, description="Defaults to the old title.")
    type: MemoryType | None = Field(None, description="Defaults to the old type.")
    importance: Importance | None = Field(None, description="Defaults to the old importance.")
    metadata: JsonObject | None = Field(None, description="Defaults to the old metadata.")
    valid_from: Timestamp | None = Field(None, description="When the new version became true; default now.")
    reason: str | None = Field(None, max_length=1000, description="Why it changed; kept in history.")


class MemorySupersedeResult(ToolResult):
    id: str = Field(description="The new current memory.")
    superseded_id: str
    recorded_at: Timestamp


MEMORY_SUPERSEDE = ToolSpec(
    name="memory_supersede", domain="memory", args=MemorySupersedeArgs, result=MemorySupersedeResult,
    message=msg.SupersedeMemory, actor="writer",
    startup=True,
    description=(
        "Replace a memory that is no longer true with a corrected one. The old version is closed, not erased: "
        "it stays in history and as_of searches, linked to the new one by 'supersedes'. Use it when the user "
        "changes a decision or a fact changes."
    ),
)


class MemoryUpdateArgs(ToolArgs):
    id: MemoryId
    content: Content | None = None
    title: str | None = Field(None, max_length=500)
    metadata: JsonObject | None = None
    importance: Importance | None = None
    expires_at: Timestamp | None = None
    reason: str | None = Field(None, max_length=1000, description="Why it changed; kept in history.")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def changes(self) -> dict[str, Any]:
        """The fields given (and not None): what UpdateMemory changes."""
        return {k: getattr(self, k) for k in sorted(self.model_fields_set - {"id", "reason"})
                if getattr(self, k) is not None}


MEMORY_UPDATE = ToolSpec(
    name="memory_update", domain="memory", args=MemoryUpdateArgs, result=MemoryRecord,
    message=msg.UpdateMemory, actor="writer",
    description=(
        "Correct a memory: a typo, a better title, new metadata or importance. It keeps its id; the previous "
        "version stays as a retired version (memory_history, as_of). For a fact that changed in the world, use "
        "memory_supersede instead."
    ),
)


class MemoryDeleteArgs(ToolArgs):
    id: MemoryId
    hard: bool = Field(False, description="Erase the row and its history for good.")
    confirm: bool = Field(False, description="Must be true for a hard delete.")
    reason: str | None = Field(None, max_length=1000)

    @model_validator(mode="after")
    def _confirmed(self) -> MemoryDeleteArgs:
        if self.hard and not self.confirm:
            raise ConfirmationRequired(f"hard delete of {self.id} needs confirm=true")  # not a ValueError: passes as is
        return self


class MemoryDeleteResult(ToolResult):
    id: str
    deleted: Literal["soft", "hard"]


MEMORY_DELETE = ToolSpec(
    name="memory_delete", domain="memory", args=MemoryDeleteArgs, result=MemoryDeleteResult, destructive=True,
    message=msg.DeleteMemory, actor="writer",
    description=(
        "Retire a memory that is wrong or unwanted. By default it is soft-deleted: hidden from search but kept "
        "in history and as_of queries. hard=true with confirm=true erases it permanently."
    ),
)


class MemoryRestoreArgs(ToolArgs):
    id: MemoryId = Field(description="A superseded, soft-deleted or archived memory.")
    reason: str | None = Field(None, max_length=1000, description="Why it holds again; kept in history.")


class MemoryRestoreResult(ToolResult):
    id: str
    retired_id: str | None = Field(description="The newer version that was current and is now retired, if any.")


MEMORY_RESTORE = ToolSpec(
    name="memory_restore", domain="memory", args=MemoryRestoreArgs, result=MemoryRestoreResult,
    message=msg.RestoreMemory, actor="writer",
    description=(
        "Make a superseded or soft-deleted memory current again, e.g. when a correction proves wrong, or bring "
        "back one the cognitive loop archived (unused for long, or expired: its expiry is cleared). A newer "
        "version that is current is retired, so one version stays current; history records the restore. A "
        "hard-deleted memory is gone for good."
    ),
)


class MemoryPinArgs(ToolArgs):
    id: MemoryId


class MemoryPinResult(ToolResult):
    id: str
    pinned: bool


MEMORY_PIN = ToolSpec(
    name="memory_pin", domain="memory", args=MemoryPinArgs, result=MemoryPinResult,
    message=msg.PinMemory, actor="writer",
    description="Pin a memory that must stay prominent (a standing instruction, a key decision).",
)
MEMORY_UNPIN = ToolSpec(
    name="memory_unpin", domain="memory", args=MemoryPinArgs, result=MemoryPinResult,
    message=msg.UnpinMemory, actor="writer",
    description="Remove the pin from a memory.",
)


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


MEMORY_HISTORY = ToolSpec(
    name="memory_history", domain="memory", args=MemoryGetArgs, result=MemoryHistoryResult, read_only=True,
    message=msg.GetHistory, actor="searcher",
    description=(
        "Show everything that happened to a memory: creation, updates with previous values, pins, supersession "
        "and deletion, each with who did it and when, plus its chain of versions."
    ),
    audit=lambda res: (('memory', memory_id) for memory_id in dict.fromkeys([res.id, *res.versions])),
)


class MemoryLinkArgs(ToolArgs):
    from_id: MemoryId
    to_id: MemoryId
    type: RelationType = "related"


class MemoryLinkResult(ToolResult):
    from_id: str
    to_id: str
    type: str
    created: bool


MEMORY_LINK = ToolSpec(
    name="memory_link", domain="memory", args=MemoryLinkArgs, result=MemoryLinkResult,
    message=msg.LinkMemories, actor="writer",
    description="Record a typed relationship between two memories (related, contradicts, derived_from, …).",
)


class MemoryGraphArgs(ToolArgs):
    id: MemoryId
    depth: int = Field(1, ge=1, le=3)


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


MEMORY_GRAPH = ToolSpec(
    name="memory_graph", domain="memory", args=MemoryGraphArgs, result=MemoryGraphResult, read_only=True,
    message=msg.GetGraph, actor="searcher",
    description="Show the memories linked to one memory, up to three hops away, with the link types.",
    audit=lambda res: (('memory', node.id) for node in res.nodes),
)


class MemoryVerifyArgs(ToolArgs):
    id: MemoryId | None = Field(None, description="One memory; omit to check every memory.")


class MemoryVerifyResult(ToolResult):
    checked: int
    ok: int
    mismatched: list[str]


MEMORY_VERIFY = ToolSpec(
    name="memory_verify", domain="memory", args=MemoryVerifyArgs, result=MemoryVerifyResult, read_only=True,
    message=msg.VerifyMemories, actor="searcher",
    description="Check that stored content still matches its SHA-256 hash (integrity), for one memory or all.",
)

MEMORY_TOOLS: tuple[ToolSpec, ...] = (
    MEMORY_WRITE, MEMORY_SEARCH, MEMORY_GET, MEMORY_SUPERSEDE, MEMORY_UPDATE, MEMORY_DELETE, MEMORY_PIN,
    MEMORY_UNPIN, MEMORY_HISTORY, MEMORY_LINK, MEMORY_GRAPH, MEMORY_VERIFY, MEMORY_RESTORE,
)
