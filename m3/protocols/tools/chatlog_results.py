"""Results of the ``chatlog`` domain tools (apart from the declarations: the actor requests name them)."""

from __future__ import annotations

from m3.protocols.base import ToolResult
from m3.protocols.tools.fields import Timestamp


class ChatlogWriteResult(ToolResult):
    id: str
    conversation_id: str
    turn: int


class ChatItem(ToolResult):
    id: str
    conversation_id: str
    role: str
    content: str
    turn: int
    at: Timestamp
    agent_id: str | None
    bm25_score: float
    score: float


class ChatlogSearchResult(ToolResult):
    count: int
    items: list[ChatItem]
    query: str
