"""Arguments, results and declarations of the ``conversations`` domain: whole conversations of the chat log.

A conversation is the chat rows sharing a ``conversation_id`` (and the memories written with it). Every read
sees only the rows the caller may read (isolation as for chatlog_list); the changes touch only the caller's own
rows. docs/conversations.md.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, model_validator

from m3.errors import ConfirmationRequired
from m3.protocols.base import ToolArgs, ToolResult, ToolSpec
from m3.protocols.messages import conversations as msg
from m3.protocols.tools.chatlog import ChatItem, ChatMessage
from m3.protocols.tools.fields import MAX_STORE_INT, ChatRole, Identifier, MemoryType, Scope, Text, Timestamp

#: The most conversations one conversations_list page holds, and the most turns one conversations_get shows.
MAX_CONVERSATION_PAGE = 500
MAX_TURN_PAGE = 1000
#: The most turns one conversations_promote turns into memories.
MAX_PROMOTE = 200
#: The most sentences a summary has.
MAX_SUMMARY_SENTENCES = 20

ConversationId = Identifier


class ConversationsListArgs(ToolArgs):
    limit: int = Field(50, ge=1, le=MAX_CONVERSATION_PAGE, description=f"How many; at most {MAX_CONVERSATION_PAGE}.")
    offset: int = Field(0, ge=0, le=MAX_STORE_INT, description="Skip this many (the next_offset of the last page).")
    scope: Scope | None = Field(None, description="Only messages of this scope count.")


class ConversationInfo(ToolResult):
    conversation_id: str
    messages: int = Field(description="How many of its messages the caller may read.")
    first_at: Timestamp
    last_at: Timestamp
    agents: list[str] = Field(description="The agents that wrote those messages.")
    roles: list[str] = Field(description="The roles that speak in them (user, assistant ...).")


class ConversationsListResult(ToolResult):
    count: int
    items: list[ConversationInfo] = Field(description="The most recently active first.")
    next_offset: int | None = Field(description="Pass as offset for the next page; none when this was the last.")


CONVERSATIONS_LIST = ToolSpec(
    name="conversations_list", domain="conversations", args=ConversationsListArgs, result=ConversationsListResult,
    message=msg.ListConversations, actor="searcher", read_only=True,
    description=(
        "List the conversations of the chat log you can see, the most recently active first, with their message "
        "counts, first and last times and participants, a page at a time, e.g. to pick the conversation to "
        "resume or summarise."
    ),
)


class ConversationsGetArgs(ToolArgs):
    conversation_id: ConversationId
    after_turn: int | None = Field(None, ge=0, le=MAX_STORE_INT, description="Only turns after this one.")
    limit: int = Field(500, ge=1, le=MAX_TURN_PAGE, description=f"How many turns; at most {MAX_TURN_PAGE}.")
    memories: bool = Field(True, description="Also the memories written with this conversation_id.")


class ConversationMemory(ToolResult):
    id: str
    type: str
    title: str | None
    content: str
    source: str | None
    recorded_at: Timestamp
    turn: int | None = Field(description="The turn it was promoted from, if it was.")


class ConversationsGetResult(ToolResult):
    conversation_id: str
    count: int = Field(description="How many turns this page holds.")
    turns: list[ChatMessage] = Field(description="In turn order.")
    memories: list[ConversationMemory] = Field(description="Current memories of the conversation, oldest first.")
    next_after_turn: int | None = Field(description="When more turns may follow: pass as after_turn.")


CONVERSATIONS_GET = ToolSpec(
    name="conversations_get", domain="conversations", args=ConversationsGetArgs, result=ConversationsGetResult,
    message=msg.GetConversation, actor="searcher", read_only=True,
    description=(
        "Read one whole conversation: its turns in order from the chat log, and the memories written from it "
        "(promoted turns, summaries), e.g. to resume it with everything that was said and kept. A conversation "
        "with nothing you may see is not_found."
    ),
    audit=lambda res: [*(('chat', t.id) for t in res.turns), *(('memory', m.id) for m in res.memories)],
)


class ConversationsSearchArgs(ToolArgs):
    query: Text
    k: int = Field(8, ge=1, le=100, description="How many conversations; at most 100.")
    role: ChatRole | None = None
    scope: Scope | None = Field(None, description="Only messages of this scope.")


class ConversationHit(ToolResult):
    conversation_id: str
    score: float = Field(description="Its best turn's chatlog_search score.")
    hits: int = Field(description="How many of its turns matched.")
    best: ChatItem = Field(description="The turn that matched best.")


class ConversationsSearchResult(ToolResult):
    count: int
    items: list[ConversationHit]
    query: str


CONVERSATIONS_SEARCH = ToolSpec(
    name="conversations_search", domain="conversations", args=ConversationsSearchArgs,
    result=ConversationsSearchResult, read_only=True,
    description=(
        "Find the conversations whose turns match a query, by words and by meaning (chatlog_search's two legs), "
        "best first with the turn that matched best, e.g. 'the conversation where we planned the migration'. "
        "Use chatlog_search for the single messages instead."
    ),
    audit=lambda res: (('chat', hit.best.id) for hit in res.items),
)


class ConversationsPromoteArgs(ToolArgs):
    conversation_id: ConversationId
    turns: list[Annotated[int, Field(ge=0, le=MAX_STORE_INT)]] | None = Field(
        None, min_length=1, max_length=MAX_PROMOTE, description=(
        f"Which turns; default every turn (at most {MAX_PROMOTE} a call)."))
    type: MemoryType = Field("note", description="The memory type of the memories written.")
    importance: float = Field(0.5, ge=0.0, le=1.0)
    scope: Scope | None = Field(None, description="Scope of the memories; default each turn's own scope.")


class PromotedTurn(ToolResult):
    turn: int
    chat_id: str
    memory_id: str
    created: bool = Field(description="False when the turn had been promoted before (that memory is named).")


class ConversationsPromoteResult(ToolResult):
    conversation_id: str
    created: int
    items: list[PromotedTurn] = Field(description="One per promoted turn, in turn order.")


CONVERSATIONS_PROMOTE = ToolSpec(
    name="conversations_promote", domain="conversations", args=ConversationsPromoteArgs,
    result=ConversationsPromoteResult, message=msg.PromoteTurns, actor="writer",
    description=(
        "Turn chosen turns of a conversation into memories, each recording where it came from (conversation, "
        "turn, message id), so that what was said becomes searchable knowledge, e.g. a decision stated in a "
        "chat. A turn promoted before is not promoted again: its memory is named instead. Redacted turns are "
        "skipped."
    ),
)


class ConversationsSummariseArgs(ToolArgs):
    conversation_id: ConversationId
    sentences: int = Field(5, ge=1, le=MAX_SUMMARY_SENTENCES, description=(
        f"How many sentences the summary keeps; at most {MAX_SUMMARY_SENTENCES}."))
    store: bool = Field(False, description="Also store the summary as a memory (type summary) of the conversation.")


class SummarySentence(ToolResult):
    text: str
    turn: int
    score: float


class ConversationsSummariseResult(ToolResult):
    conversation_id: str
    summary: str
    method: str = Field(description="How it was made: extractive (sentence scoring, no model).")
    sentences: list[SummarySentence] = Field(description="The sentences kept, in the order they were said.")
    turns: int = Field(description="How many turns were read.")
    memory_id: str | None = Field(description="With store=true: the memory holding the summary.")


CONVERSATIONS_SUMMARISE = ToolSpec(
    name="conversations_summarise", domain="conversations", args=ConversationsSummariseArgs,
    result=ConversationsSummariseResult,
    description=(
        "Summarise a conversation by picking its most representative sentences (deterministic, no model: the "
        "same conversation always gives the same summary), e.g. before handing it over; store=true keeps it as "
        "a summary memory linked to the conversation."
    ),
)


class _WholeConversationChange(ToolArgs):
    """The arguments of a change to a whole conversation that cannot be undone; ``_verb`` names it."""

    _verb = "changing"
    conversation_id: ConversationId
    reason: str | None = Field(None, max_length=500, description="Why; kept with the record of the change.")
    confirm: bool = Field(False, description="Must be true: the old text cannot be brought back.")

    @model_validator(mode="after")
    def _confirmed(self) -> _WholeConversationChange:
        if not self.confirm:
            raise ConfirmationRequired(f"{self._verb} conversation {self.conversation_id} needs confirm=true")
        return self


class ConversationsDeleteArgs(_WholeConversationChange):
    _verb = "deleting"


class ConversationsDeleteResult(ToolResult):
    conversation_id: str
    deleted: int = Field(description="How many messages were deleted (with their vectors).")
    at: Timestamp


CONVERSATIONS_DELETE = ToolSpec(
    name="conversations_delete", domain="conversations", args=ConversationsDeleteArgs,
    result=ConversationsDeleteResult, message=msg.DeleteConversation, actor="writer", destructive=True,
    description=(
        "Delete a whole conversation from the verbatim log: every message of it you wrote, with their vectors. "
        "The deletion (who, when, why, how many) is kept in conversations_history; memories promoted from it "
        "stay (memory_delete retires them). Needs confirm=true."
    ),
)


class ConversationsRedactArgs(_WholeConversationChange):
    _verb = "redacting"


class ConversationsRedactResult(ToolResult):
    conversation_id: str
    redacted: int = Field(description="How many messages were redacted now (those redacted before not counted).")
    at: Timestamp


CONVERSATIONS_REDACT = ToolSpec(
    name="conversations_redact", domain="conversations", args=ConversationsRedactArgs,
    result=ConversationsRedactResult, message=msg.RedactConversation, actor="writer", destructive=True,
    description=(
        "Redact a whole conversation: every message of it you wrote keeps its place but its text becomes "
        "'[redacted]', its vector is dropped and search no longer finds it, e.g. when secrets were discussed "
        "throughout. Recorded in conversations_history. Needs confirm=true."
    ),
)


class ConversationsStatsArgs(ToolArgs):
    conversation_id: ConversationId


class ConversationsStatsResult(ToolResult):
    conversation_id: str
    messages: int
    by_role: dict[str, int]
    agents: list[str]
    words: int = Field(description="Words in the messages (redacted ones count their marker).")
    redacted: int
    embedded: int = Field(description="Messages with a vector for the semantic leg.")
    memories: int = Field(description="Current memories written with this conversation_id that you may see.")
    promoted: int = Field(description="Of those, how many were promoted from a turn.")
    first_at: Timestamp
    last_at: Timestamp
    duration_s: float


CONVERSATIONS_STATS = ToolSpec(
    name="conversations_stats", domain="conversations", args=ConversationsStatsArgs,
    result=ConversationsStatsResult, message=msg.ConversationStats, actor="searcher", read_only=True,
    description=(
        "Count one conversation: messages per role, participants, words, how long it ran, how many turns are "
        "redacted or embedded, and how many memories came from it, e.g. to decide whether it is worth "
        "summarising or promoting."
    ),
)


class ConversationsHistoryArgs(ToolArgs):
    conversation_id: ConversationId


class ConversationEvent(ToolResult):
    event: str
    actor: str | None
    at: Timestamp
    details: dict[str, Any]


class ConversationsHistoryResult(ToolResult):
    conversation_id: str
    events: list[ConversationEvent] = Field(description="Oldest first.")


CONVERSATIONS_HISTORY = ToolSpec(
    name="conversations_history", domain="conversations", args=ConversationsHistoryArgs,
    result=ConversationsHistoryResult, message=msg.ConversationHistory, actor="searcher", read_only=True,
    description=(
        "Show what was done to a conversation as a whole (deleted, redacted, turns promoted, summary stored): "
        "who, when, why and how many, never the text, e.g. to check that a deletion happened."
    ),
)

CONVERSATION_TOOLS: tuple[ToolSpec, ...] = (
    CONVERSATIONS_LIST, CONVERSATIONS_GET, CONVERSATIONS_SEARCH, CONVERSATIONS_PROMOTE, CONVERSATIONS_SUMMARISE,
    CONVERSATIONS_DELETE, CONVERSATIONS_REDACT, CONVERSATIONS_STATS, CONVERSATIONS_HISTORY,
)
