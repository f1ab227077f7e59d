"""Arguments, results and declarations of the ``chatlog`` domain tools."""

from __future__ import annotations

from pydantic import Field

from m3.protocols.base import ToolArgs, ToolSpec
from m3.protocols.tools.chatlog_results import ChatItem, ChatlogSearchResult, ChatlogWriteResult
from m3.protocols.tools.fields import ChatRole, Identifier, Text, Timestamp


class ChatlogWriteArgs(ToolArgs):
    conversation_id: Identifier
    role: ChatRole
    content: Text = Field(description="The message, stored exactly as given.")
    agent_id: Identifier | None = Field(None, description="Defaults to the calling agent.")
    model: str | None = Field(None, max_length=200, description="The model that produced the message.")
    turn: int | None = Field(None, ge=0, description="Position in the conversation; default: next.")
    at: Timestamp | None = Field(None, description="When the message was said; default now.")


CHATLOG_WRITE = ToolSpec(
    name="chatlog_write", domain="chatlog", args=ChatlogWriteArgs, result=ChatlogWriteResult,
    description=(
        "Append one message to the verbatim conversation log. Use it to keep whole conversations; use "
        "memory_write for the facts and decisions worth remembering on their own."
    ),
)


class ChatlogSearchArgs(ToolArgs):
    query: Text
    k: int | None = Field(None, ge=1, description="How many results; default 8.")
    conversation_id: Identifier | None = None
    role: ChatRole | None = None
    agent_id: Identifier | None = None


CHATLOG_SEARCH = ToolSpec(
    name="chatlog_search", domain="chatlog", args=ChatlogSearchArgs, result=ChatlogSearchResult, startup=True,
    read_only=True,
    description=(
        "Search the verbatim conversation log by keywords when you need what was literally said, e.g. "
        "'what did the user say about the deploy on Monday'. Filter by conversation, role or agent."
    ),
)

CHATLOG_TOOLS: tuple[ToolSpec, ...] = (CHATLOG_WRITE, CHATLOG_SEARCH)

__all__ = ["CHATLOG_TOOLS", "ChatItem", "ChatlogSearchArgs", "ChatlogSearchResult", "ChatlogWriteArgs",
           "ChatlogWriteResult"]
