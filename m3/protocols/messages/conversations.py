"""Messages of the conversations domain and of the chat log's semantic leg (issue 20).

Chat vectors travel as little-endian float32 bytes, as memory vectors do (:class:`StoreVectors`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field

from m3.protocols.base import Message, Request
from m3.protocols.messages.memory import Change, Filtered

if TYPE_CHECKING:  # the tool modules import these requests, so replies are named in strings (see Request)
    from m3.protocols.tools import chat_reads, conversations  # noqa: F401


# --- the semantic leg ----------------------------------------------------------------------------


class ChatWritten(Message):
    """The Writer committed these chat rows: the Embedder gives them vectors."""

    ids: tuple[str, ...]


class StoreChatVectors(Message):
    """Vectors of chat rows computed by the Embedder; the Writer stores those of rows still unredacted."""

    model: str
    dim: int
    ids: tuple[str, ...]
    vectors: bytes


# --- chat log reads ------------------------------------------------------------------------------


class GetChat(Filtered, Request["chat_reads.ChatlogGetResult"]):
    """One chat row by ``id``, or by ``conversation_id`` and ``turn``; not_found when the reader cannot see it."""

    id: str | None = None
    conversation_id: str | None = None
    turn: int | None = None


class ChatContext(Filtered, Request["chat_reads.ChatlogContextResult"]):
    """The rows around chat row ``id`` in its conversation: ``before`` earlier and ``after`` later ones."""

    id: str
    before: int = 3
    after: int = 3


class ChatStats(Filtered, Request["chat_reads.ChatlogStatsResult"]):
    """Counts of the chat rows the reader sees (and their vectors of ``model``)."""

    model: str | None = None


# --- conversations -------------------------------------------------------------------------------


class ListConversations(Filtered, Request["conversations.ConversationsListResult"]):
    limit: int = 50
    offset: int = 0


class GetConversation(Filtered, Request["conversations.ConversationsGetResult"]):
    conversation_id: str
    after_turn: int | None = None
    limit: int = 500
    memories: bool = True


class ConversationStats(Filtered, Request["conversations.ConversationsStatsResult"]):
    conversation_id: str


class ConversationHistory(Filtered, Request["conversations.ConversationsHistoryResult"]):
    conversation_id: str


class DeleteConversation(Change, Request["conversations.ConversationsDeleteResult"]):
    """Delete the actor's own rows of the conversation (and their vectors); recorded as a conversation event."""

    conversation_id: str
    reason: str | None = None


class RedactConversation(Change, Request["conversations.ConversationsRedactResult"]):
    """Redact the actor's own unredacted rows of the conversation (and drop their vectors); recorded."""

    conversation_id: str
    reason: str | None = None


class PromoteTurns(Change, Request["conversations.ConversationsPromoteResult"]):
    """Write a memory per chosen turn (the actor's or shared rows it sees), unless one was promoted from it."""

    conversation_id: str
    turns: tuple[int, ...] | None = None
    type: str = "note"
    importance: float = 0.5
    scope: str | None = None
    user_id: str | None = None


class RecordConversationEvent(Change, Request[None]):
    """Record that something was done to a conversation as a whole (conversations_summarise's stored summary)."""

    conversation_id: str
    event: str
    details: dict[str, object] = Field(default_factory=dict)
