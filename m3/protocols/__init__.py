"""Frozen messages and tool declarations shared by every layer."""

from m3.protocols.base import Message, ToolArgs, ToolResult, ToolSpec
from m3.protocols.chatlog import CHATLOG_TOOLS
from m3.protocols.memory import MEMORY_TOOLS
from m3.protocols.meta import META_TOOLS

ALL_TOOLS: tuple[ToolSpec, ...] = MEMORY_TOOLS + CHATLOG_TOOLS + META_TOOLS

__all__ = ["ALL_TOOLS", "Message", "ToolArgs", "ToolResult", "ToolSpec"]
