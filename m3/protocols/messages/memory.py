"""Messages exchanged between the gateway and the actors, and between actors.

Requests expect one reply (a :class:`~m3.protocols.base.Request` names its type, often a tool's
result); events (``…ed`` names) are told and expect none.
Vectors travel as little-endian float32 bytes so that messages stay
immutable.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, TypedDict

from pydantic import BaseModel, Field, field_validator

from m3.protocols.base import Message, Request

if TYPE_CHECKING:  # the tool modules import these requests, so replies are named in strings (see Request)
    from m3.protocols.tools import chatlog, links, memory, sharing  # noqa: F401

# --- shared values ------------------------------------------------------------------------------

#: The memory type of the chunks of indexed files (the ``files`` tools, docs/files.md). Not one of the types a
#: caller may write, and left out of a search that names no type: memory_search shows no file chunks.
FILE_CHUNK = "file_chunk"


class MemoryFilter(Message):
    """Which memories a read may see. Applied in SQL on every retrieval leg."""

    type: str | None = None
    agent_id: str | None = None
    user_id: str | None = None
    scope: str | None = None
    conversation_id: str | None = None
    #: Transaction time to look at; None means "now, current rows only".
    as_of: datetime | None = None
    #: Valid time to look at: the rows that held in the world at this time, as the store knew at ``as_of``
    #: (so a fact superseded since still answers for its own period). None: no valid-time condition.
    valid_at: datetime | None = None
    #: The agent doing the read; with ``enforce_isolation`` it sees only its own scope=agent rows and those
    #: shared with it (memory_share).
    reader_agent_id: str | None = None
    enforce_isolation: bool = False
    #: Whether memories shared with the reader (memory_share) count: False for changes, which only the owner
    #: of a private memory may make.
    grants: bool = True
    #: Only memories whose ``source`` is this path or lies under it (files_search's folder).
    source_prefix: str | None = None
    #: Also archived memories (decay, expiry: ``archived_at`` set, or ``expires_at`` passed); default reads
    #: leave them out (:func:`m3.store.filters.archive_clause`).
    include_archived: bool = False


class NewMemory(Message):
    type: str
    content: str
    title: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    scope: str = "agent"
    agent_id: str | None = None
    user_id: str | None = None
    importance: float = 0.5
    pinned: bool = False
    expires_at: datetime | None = None
    valid_from: datetime | None = None
    conversation_id: str | None = None
    source: str | None = None


class WriteOutcome(Message):
    id: str
    created: bool
    content_hash: str
    recorded_at: datetime


# --- writer requests ----------------------------------------------------------------------------


class WriteMemories(Request[list[WriteOutcome]]):
    """Insert memories in one transaction; identical current memories are not duplicated."""

    memories: tuple[NewMemory, ...]
    actor: str | None = None


class WriteMemory(NewMemory, Request["memory.MemoryWriteResult"]):
    """memory_write: one memory, written like a :class:`WriteMemories` of one (and grouped with them)."""

    actor: str | None = None


class Filtered(Message):
    """A request that sees the store as ``filter`` does: its reader and isolation."""

    filter: MemoryFilter = MemoryFilter()


class Change(Filtered):
    """A change committed by the Writer for the agent ``actor`` (history records it). Memories and tasks named
    by id (or prefix) are resolved inside its transaction as ``filter`` (the caller's visibility) sees them:
    not_found or ambiguous_id otherwise; ``filter`` also decides which result memory a task's reply may show."""

    actor: str | None = None


class SupersedeMemory(Change, Request["memory.MemorySupersedeResult"]):
    id: str
    content: str
    title: str | None = None
    type: str | None = None
    importance: float | None = None
    metadata: dict[str, Any] | None = None
    valid_from: datetime | None = None
    reason: str | None = None


class UpdateMemory(Change, Request["memory.MemoryRecord"]):
    id: str
    changes: dict[str, Any]
    reason: str | None = None


class DeleteMemory(Change, Request["memory.MemoryDeleteResult"]):
    id: str
    hard: bool = False
    reason: str | None = None


class RestoreMemory(Change, Request["memory.MemoryRestoreResult"]):
    id: str
    reason: str | None = None


class PinMemory(Change, Request["memory.MemoryPinResult"]):
    id: str
    pinned: bool = True


class UnpinMemory(PinMemory):
    pinned: bool = False


class LinkMemories(Change, Request["memory.MemoryLinkResult"]):
    from_id: str
    to_id: str
    type: str


class UnlinkMemories(Change, Request["links.MemoryUnlinkResult"]):
    """Remove the relationships ``from_id`` → ``to_id`` (of ``type``, or every type when None)."""

    from_id: str
    to_id: str
    type: str | None = None


class ShareMemory(Change, Request["sharing.MemoryShareResult"]):
    """Share a private memory with ``agents`` (``share``) or stop sharing it; only its owner (``actor``) may."""

    id: str
    agents: tuple[str, ...]
    share: bool = True


class UnshareMemory(ShareMemory):
    share: bool = False


class ChatEntry(Message):
    """One message of a :class:`WriteChats`."""

    conversation_id: str
    role: str
    content: str
    scope: str = "agent"
    model: str | None = None
    turn: int | None = None
    at: datetime | None = None


class WriteChat(Request["chatlog.ChatlogWriteResult"]):
    conversation_id: str
    role: str
    content: str
    agent_id: str | None = None
    scope: str = "agent"
    model: str | None = None
    turn: int | None = None
    at: datetime | None = None


class WriteChats(Request["chatlog.ChatlogWriteBulkResult"]):
    """Append ``messages`` in order, all in one transaction, each written by ``agent_id``."""

    messages: tuple[ChatEntry, ...]
    agent_id: str | None = None

    @field_validator("messages", mode="before")
    @classmethod
    def _entries(cls, value: Any) -> Any:
        # The tool's argument models (ChatlogEntry) arrive as they were validated: taken by their fields.
        if isinstance(value, (list, tuple)):
            return [v.model_dump() if isinstance(v, BaseModel) and not isinstance(v, ChatEntry) else v for v in value]
        return value


class RedactChat(Change, Request["chatlog.ChatlogRedactResult"]):
    """Replace chat row ``id``'s content by the redaction marker; only the row's own agent (``actor``) may."""

    id: str
    reason: str | None = None


class StoreVectors(Message):
    """Vectors computed by the Embedder; the Writer stores them and runs similarity supersession."""

    model: str
    dim: int
    ids: tuple[str, ...]
    vectors: bytes
    #: Run similarity supersession (false when re-embedding memories already checked).
    supersede: bool = True

    @classmethod
    def merged(cls, msgs: list[StoreVectors]) -> StoreVectors:
        """One StoreVectors doing what ``msgs`` do in turn (of one model and flag): a memory given several
        vectors keeps the last."""
        width = msgs[0].dim * 4
        last: dict[str, bytes] = {}
        for msg in msgs:
            if len(msg.vectors) != width * len(msg.ids):
                raise ValueError(f"StoreVectors holds {len(msg.vectors)} bytes for {len(msg.ids)} vectors of {msg.dim}")
            for i, memory_id in enumerate(msg.ids):
                last.pop(memory_id, None)
                last[memory_id] = msg.vectors[i * width:(i + 1) * width]
        return cls(model=msgs[0].model, dim=msgs[0].dim, ids=tuple(last), vectors=b"".join(last.values()),
                   supersede=msgs[0].supersede)


class TouchMemories(Message):
    """Record that memories were read (access statistics)."""

    ids: tuple[str, ...]
    at: datetime


# --- events -------------------------------------------------------------------------------------


class MemoriesWritten(Message):
    """New or changed memory texts that need a vector. ``texts`` aligns with ``ids``. ``supersede``: the vector
    runs similarity supersession (False for memories that arrived from a warehouse sync, already judged where
    they were written)."""

    ids: tuple[str, ...]
    texts: tuple[str, ...]
    supersede: bool = True


class MemoriesErased(Message):
    """Memories removed for good (hard delete)."""

    ids: tuple[str, ...]


class MemoriesArchived(Message):
    """Memories archived (decay, expiry): the Searcher's vector index leaves them out of default searches."""

    ids: tuple[str, ...]


class MemoriesRestored(Message):
    """Archived memories made visible again (memory_restore): their vectors count in default searches again."""

    ids: tuple[str, ...]


# --- reader requests ----------------------------------------------------------------------------


class SearchWeights(Message):
    dense: float
    bm25: float
    title: float
    importance: float
    recency: float
    access: float
    pin: float
    recency_half_life_days: float
    mmr_lambda: float
    #: Weight of the conversation signal (support from the memory's conversation, see ranking.py).
    conversation: float = 0.0
    #: How many of a conversation's best-scoring memories its support is the mean of.
    conversation_top: int = 2
    #: Weight of the time signal, applied only when the query names a time (see ranking.py).
    time: float = 0.0
    #: Weight of the neighbour signal (the best of the memory and its conversation neighbours, ranking.py).
    neighbour: float = 0.0
    #: Weight of the proximity signal (the query's neighbouring keyword pairs held close together, ranking.py).
    proximity: float = 0.0
    #: Words within which the two words of a pair count as close (proximity.py).
    proximity_window: int = 4
    #: How many of the best candidates (at least k) have their text read for the proximity signal.
    proximity_depth: int = 10


class SearchMemories(Request["memory.MemorySearchResult"]):
    query: str
    #: None: the configured ``search.k``; above ``limits.max_k`` the Searcher refuses.
    k: int | None = None
    filter: MemoryFilter
    explain: bool = False
    #: When the question is asked: the reference of its relative times and of recency. None: the clock.
    now: datetime | None = None


class GetMemory(Filtered, Request["memory.MemoryRecord"]):
    id: str


class GetHistory(Filtered, Request["memory.MemoryHistoryResult"]):
    id: str


class GetGraph(Filtered, Request["memory.MemoryGraphResult"]):
    id: str
    depth: int


class VerifyMemories(Filtered, Request["memory.MemoryVerifyResult"]):
    id: str | None = None


class SearchChat(Filtered, Request["chatlog.ChatlogSearchResult"]):
    """Chat rows matching ``query``; the scope filter of memories applies to them alike."""

    query: str
    k: int | None = None
    conversation_id: str | None = None
    role: str | None = None
    agent_id: str | None = None
    explain: bool = False


class ListChat(Filtered, Request["chatlog.ChatlogListResult"]):
    """One conversation's rows in turn order after ``after_turn``, or (no ``conversation_id``) the
    conversations; only rows ``filter`` sees."""

    conversation_id: str | None = None
    after_turn: int | None = None
    limit: int = 100


#: What the Searcher counts of the store's vectors (the reply to :class:`EmbeddingStats`).
class EmbeddingCounts(TypedDict):
    vectors_by_model: dict[str, int]
    pending: int
    memories: int
    active_model: str | None
    models: dict[str, str]
    search_model: str
    index_size: int | None


class EmbeddingStats(Request[EmbeddingCounts]):
    model: str


#: What the Searcher reads of its store for diagnostics_store_status (the reply to :class:`StoreStatus`):
#: the schema revision in place and :func:`m3.store.status.describe` (counts, the dialect's server facts).
class StoreFacts(TypedDict):
    revision: str
    description: dict[str, Any]


class StoreStatus(Request[StoreFacts]):
    #: The configured embedding model: the memories without a vector of it are counted.
    model: str


#: The Embedder actor's backend, model, queue and counters (the reply to :class:`EmbedderInfo`).
class EmbedderState(TypedDict):
    backend: str
    model: str
    dim: int | None
    active_model: str
    reembedding: bool
    queued: int
    last_error: str | None
    embedded: int
    reused: int
    server: dict[str, Any] | None
    nice: int | None  # the embedding thread's nice value when lowered (embed.nice), else None


class EmbedderInfo(Request[EmbedderState]):
    """Ask the Embedder actor for its backend, model and queue length."""


class Flush(Request[bool]):
    """Answered once everything the actor received before it has been handled."""


# --- embedding models ---------------------------------------------------------------------------


class MarkModelBuilding(Message):
    """Record that the store is being re-embedded for ``model`` (Writer)."""

    model: str
    dim: int


class ActivateModel(Request[bool]):
    """Make ``model`` the one search uses (Writer); answers False, changing nothing, when
    ``require_complete`` and a current memory still lacks a vector of it."""

    model: str
    dim: int
    require_complete: bool = True


class Drain(Request[bool]):
    """Shutdown (Embedder): embed the new memories and, in a long-running process, the backlog too; never a
    whole re-embedding for a change of model (that continues at the next start or with `m3 embedder
    reembed`). A one-shot command's Embedder embeds only the memories its process wrote."""
