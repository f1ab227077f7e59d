"""Arguments, results and declarations of the ``chatlog`` domain tools."""

from __future__ import annotations

from pydantic import Field

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


class ChatItem(ToolResult):
    id: str
    conversation_id: str
    role: str
    content: str
    turn: int
    at: Timestamp
    agent_id: str | None
    scope: Scope
    bm25_score: float
    score: float


class ChatlogSearchResult(ToolResult):
    count: int
    items: list[ChatItem]
    query: str


CHATLOG_SEARCH = ToolSpec(
    name="chatlog_search", domain="chatlog", args=ChatlogSearchArgs, result=ChatlogSearchResult, startup=True,
    message=msg.SearchChat, actor="searcher",
    read_only=True,
    description=(
        "Search the verbatim conversation log by keywords when you need what was literally said, e.g. "
        "'what did the user say about the deploy on Monday'. Filter by conversation, role, agent or scope. "
        "With isolation on you find your own messages and those written with scope user or org."
    ),
    audit=lambda res: (('chat', item.id) for item in res.items),
)

CHATLOG_TOOLS: tuple[ToolSpec, ...] = (CHATLOG_WRITE, CHATLOG_WRITE_BULK, CHATLOG_SEARCH)
