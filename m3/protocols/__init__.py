"""Contracts shared by every layer: tool declarations (``tools``) and actor messages (``messages``)."""

from m3.protocols.base import Message, ToolArgs, ToolResult, ToolSpec

__all__ = ["Message", "ToolArgs", "ToolResult", "ToolSpec"]
