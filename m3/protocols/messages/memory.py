"""Messages exchanged between the gateway and the actors, and between actors.

Requests expect one reply; events (``…ed`` names) are told and expect none.
Vectors travel as little-endian float32 bytes so that messages stay
immutable.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import Field

from m3.protocols.base import Message

# --- shared values ------------------------------------------------------------------------------


class MemoryFilter(Message):
    """Which memories a read may see. Applied in SQL on every retrieval leg."""

    type: str | None = None
    agent_id: str | None = None
    user_id: str | None = None
    scope: str | None = None
    conversation_id: str | None = None
    #: Transaction time to look at; None means "now, current rows only".
    as_of: datetime | None = None
    #: The agent doing the read; with ``enforce_isolation`` it sees only its own scope=agent rows and those
    #: shared with it (memory_share).
    reader_agent_id: str | None = None
    enforce_isolation: bool = False
    #: Whether memories shared with the reader (memory_share) count: False for changes, which only the owner
    #: of a private memory may make.
    grants: bool = True


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


class WriteMemories(Message):
    """Insert memories in one transaction; identical current memories are not duplicated."""

    memories: tuple[NewMemory, ...]
    actor: str | None = None


class SupersedeMemory(Message):
    old_id: str
    content: str
    title: str | None = None
    type: str | None = None
    importance: float | None = None
    metadata: dict[str, Any] | None = None
    valid_from: datetime | None = None
    reason: str | None = None
    actor: str | None = None


class UpdateMemory(Message):
    id: str
    changes: dict[str, Any]
    reason: str | None = None
    actor: str | None = None


class DeleteMemory(Message):
    id: str
    hard: bool = False
    reason: str | None = None
    actor: str | None = None


class PinMemory(Message):
    id: str
    pinned: bool
    actor: str | None = None


class LinkMemories(Message):
    from_id: str
    to_id: str
    type: str
    actor: str | None = None


class ShareMemory(Message):
    """Share a private memory with ``agents`` (``share``) or stop sharing it; only its owner (``actor``) may."""

    id: str
    agents: tuple[str, ...]
    share: bool = True
    actor: str | None = None


class WriteChat(Message):
    conversation_id: str
    role: str
    content: str
    agent_id: str | None = None
    scope: str = "agent"
    model: str | None = None
    turn: int | None = None
    at: datetime | None = None


class ChatOutcome(Message):
    id: str
    conversation_id: str
    turn: int


class StoreVectors(Message):
    """Vectors computed by the Embedder; the Writer stores them and runs similarity supersession."""

    model: str
    dim: int
    ids: tuple[str, ...]
    vectors: bytes
    #: Run similarity supersession (false when re-embedding memories already checked).
    supersede: bool = True


class TouchMemories(Message):
    """Record that memories were read (access statistics)."""

    ids: tuple[str, ...]
    at: datetime


# --- events -------------------------------------------------------------------------------------


class MemoriesWritten(Message):
    """New or changed memory texts that need a vector. ``texts`` aligns with ``ids``."""

    ids: tuple[str, ...]
    texts: tuple[str, ...]


class MemoriesErased(Message):
    """Memories removed for good (hard delete)."""

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


class SearchMemories(Message):
    query: str
    k: int
    filter: MemoryFilter
    explain: bool = False


class GetMemory(Message):
    id: str
    filter: MemoryFilter = MemoryFilter()
    #: Count this as a read (access statistics); false for lookups that precede a change.
    touch: bool = True


class GetHistory(Message):
    id: str
    filter: MemoryFilter = MemoryFilter()


class GetGraph(Message):
    id: str
    depth: int
    filter: MemoryFilter = MemoryFilter()


class VerifyMemories(Message):
    id: str | None = None
    filter: MemoryFilter = MemoryFilter()


class SearchChat(Message):
    query: str
    k: int
    conversation_id: str | None = None
    role: str | None = None
    agent_id: str | None = None
    #: The reader and its isolation (the scope filter of memories applies to chat rows alike).
    filter: MemoryFilter = MemoryFilter()


class EmbeddingStats(Message):
    model: str


class EmbedderInfo(Message):
    """Ask the Embedder actor for its backend, model and queue length."""


class Flush(Message):
    """Answered once everything the actor received before it has been handled."""


# --- embedding models ---------------------------------------------------------------------------


class MarkModelBuilding(Message):
    """Record that the store is being re-embedded for ``model`` (Writer)."""

    model: str
    dim: int


class ActivateModel(Message):
    """Make ``model`` the one search uses (Writer); answers False, changing nothing, when
    ``require_complete`` and a current memory still lacks a vector of it."""

    model: str
    dim: int
    require_complete: bool = True


class Drain(Message):
    """Shutdown (Embedder): embed the new memories and, in a long-running process, the backlog too; never a
    whole re-embedding for a change of model (that continues at the next start or with `m3 embedder
    reembed`). A one-shot command's Embedder embeds only the memories its process wrote."""
