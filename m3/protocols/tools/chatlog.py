"""Arguments, results and declarations of the ``chatlog`` domain tools."""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from m3.errors import ConfirmationRequired
from m3.protocols.base import ToolArgs, ToolResult, ToolSpec
from m3.protocols.messages import memory as msg
from m3.protocols.tools.fields import (
    MAX_STORE_INT,
    CallerAgent,
    ChatRole,
    Content,
    Identifier,
    ResultCount,
    Scope,
    Text,
    Timestamp,
)


class ChatlogEntry(ToolArgs):
    """One message of the log, as chatlog_write and chatlog_write_bulk take it."""

    conversation_id: Identifier
    role: ChatRole
    content: Content = Field(description="The message, stored exactly as given.")
    scope: Scope = Field("agent", description=(
        "Who may read the message: agent (the writing agent only, while isolation is on), user or org (everyone)."))
    model: str | None = Field(None, max_length=200, description="The model that produced the message.")
    turn: int | None = Field(None, ge=0, le=MAX_STORE_INT, description="Position in the conversation; default: next.")
    at: Timestamp | None = Field(None, description="When the message was said; default now.")


class ChatlogWriteArgs(ChatlogEntry):
    agent_id: CallerAgent = Field(None, description="Defaults to the calling agent.")


class ChatlogWriteResult(ToolResult):
    id: str
    conversation_id: str
    turn: int


CHATLOG_WRITE = ToolSpec(
    name="chatlog_write", domain="chatlog", args=ChatlogWriteArgs, result=ChatlogWriteResult,
    message=msg.WriteChat, actor="writer",
    description=(
        "Append one message to the verbatim conversation log. Use it to keep whole conversations; use "
        "memory_write for the facts and decisions worth remembering on their own."
    ),
)


#: The most messages one chatlog_write_bulk appends.
MAX_CHAT_BULK = 500


class ChatlogWriteBulkArgs(ToolArgs):
    messages: list[ChatlogEntry] = Field(min_length=1, max_length=MAX_CHAT_BULK, description=(
        f"The messages, in order; each as chatlog_write takes it (without agent_id). At most {MAX_CHAT_BULK}."))
    agent_id: CallerAgent = Field(None, description="The author of every message; defaults to the calling agent.")


class ChatlogWriteBulkResult(ToolResult):
    count: int
    items: list[ChatlogWriteResult] = Field(description="One per message, in the order given.")


CHATLOG_WRITE_BULK = ToolSpec(
    name="chatlog_write_bulk", domain="chatlog", args=ChatlogWriteBulkArgs, result=ChatlogWriteBulkResult,
    message=msg.WriteChats, actor="writer",
    description=(
        "Append several messages to the verbatim conversation log at once, e.g. a whole conversation imported "
        "after the fact. Either every message is stored or none is; messages without a turn take the next "
        "turns in the order given. Use chatlog_write for one message as it is said."
    ),
)


class ChatlogSearchArgs(ToolArgs):
    query: Text
    k: ResultCount = None
    conversation_id: Identifier | None = None
    role: ChatRole | None = None
    agent_id: Identifier | None = None
    scope: Scope | None = Field(None, description="Only messages of this scope.")
    explain: bool = Field(False, description="Show how each hit's score was made (both legs' signals).")


class ChatRow(ToolResult):
    """The fields every chat-log reply shows of a message."""

    id: str
    conversation_id: str
    role: str
    content: str
    turn: int
    at: Timestamp
    agent_id: str | None
    scope: Scope


class ChatItem(ChatRow):
    bm25_score: float = Field(description="The keyword leg's raw score (0: no query word).")
    dense_score: float | None = Field(None, description=(
        "The cosine of the query and the message (the dense leg); none while the message has no vector."))
    score: float = Field(description="The fused score in 0..1 (docs/search.md, 'Chat log').")
    explanation: dict[str, Any] | None = Field(None, description="With explain=true: the signals behind score.")


class ChatlogSearchResult(ToolResult):
    count: int
    items: list[ChatItem]
    query: str


CHATLOG_SEARCH = ToolSpec(
    name="chatlog_search", domain="chatlog", args=ChatlogSearchArgs, result=ChatlogSearchResult, startup=True,
    message=msg.SearchChat, actor="searcher",
    read_only=True,
    description=(
        "Search the verbatim conversation log when you need what was literally said, e.g. 'what did the user "
        "say about the deploy on Monday': by its words and by its meaning (a paraphrase finds it too), scores "
        "explained with explain=true. Filter by conversation, role, agent or scope. "
        "With isolation on you find your own messages and those written with scope user or org."
    ),
    audit=lambda res: (('chat', item.id) for item in res.items),
)


#: The most rows one chatlog_list answers.
MAX_CHAT_PAGE = 1000


class ChatlogListArgs(ToolArgs):
    conversation_id: Identifier | None = Field(None, description=(
        "The conversation whose messages to list; none: list the conversations instead."))
    after_turn: int | None = Field(None, ge=0, le=MAX_STORE_INT, description=(
        "Only messages after this turn (the next_after_turn of the previous page)."))
    limit: int = Field(100, ge=1, le=MAX_CHAT_PAGE, description=f"How many rows; at most {MAX_CHAT_PAGE}.")
    scope: Scope | None = Field(None, description="Only messages of this scope.")


class ChatMessage(ChatRow):
    model: str | None
    redacted_at: Timestamp | None = Field(None, description="Set when chatlog_redact replaced the content.")


class ConversationSummary(ToolResult):
    conversation_id: str
    messages: int = Field(description="How many of its messages the caller may read.")
    first_at: Timestamp
    last_at: Timestamp


class ChatlogListResult(ToolResult):
    count: int = Field(description="How many messages or conversations this page holds.")
    items: list[ChatMessage] = Field(description="With conversation_id: its messages, in turn order.")
    conversations: list[ConversationSummary] = Field(description=(
        "Without conversation_id: the conversations, the most recently active first."))
    next_after_turn: int | None = Field(description=(
        "With conversation_id, when more messages may follow: pass it as after_turn for the next page."))


CHATLOG_LIST = ToolSpec(
    name="chatlog_list", domain="chatlog", args=ChatlogListArgs, result=ChatlogListResult,
    message=msg.ListChat, actor="searcher", read_only=True,
    description=(
        "Read one conversation of the verbatim log in order, a page at a time (after_turn, limit), e.g. to "
        "replay what was said before resuming it; without conversation_id, list the conversations with their "
        "message counts and first and last times. With isolation on you see your own messages and those "
        "written with scope user or org. Use chatlog_search to find messages by their words."
    ),
    audit=lambda res: (('chat', item.id) for item in res.items),
)


#: What a redacted message's content reads.
REDACTED = "[redacted]"


class ChatlogRedactArgs(ToolArgs):
    id: Identifier = Field(description="The message's id (from chatlog_write, chatlog_list or chatlog_search).")
    reason: str | None = Field(None, max_length=500, description="Why; kept with the record of the redaction.")
    confirm: bool = Field(False, description="Must be true: the old text cannot be brought back.")

    @model_validator(mode="after")
    def _confirmed(self) -> ChatlogRedactArgs:
        if not self.confirm:
            raise ConfirmationRequired(f"redacting chat message {self.id} needs confirm=true")
        return self


class ChatlogRedactResult(ToolResult):
    id: str
    conversation_id: str
    turn: int
    redacted_at: Timestamp
    redacted_by: str | None
    reason: str | None


CHATLOG_REDACT = ToolSpec(
    name="chatlog_redact", domain="chatlog", args=ChatlogRedactArgs, result=ChatlogRedactResult,
    message=msg.RedactChat, actor="writer", destructive=True,
    description=(
        f"Replace one message of the verbatim log with {REDACTED!r} when it should never have been kept, e.g. a "
        "password or personal data pasted into a conversation. The message keeps its place (id, turn) and a "
        "record of who redacted it, when and why; the old text is gone and search no longer finds its words. "
        "Only the agent that wrote a message may redact it. Needs confirm=true."
    ),
)

CHATLOG_TOOLS: tuple[ToolSpec, ...] = (CHATLOG_WRITE, CHATLOG_WRITE_BULK, CHATLOG_SEARCH, CHATLOG_LIST, CHATLOG_REDACT)
