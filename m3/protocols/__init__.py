"""Frozen messages and tool declarations shared by every layer."""

from m3.protocols.agents import AGENT_TOOLS
from m3.protocols.base import Message, ToolArgs, ToolResult, ToolSpec
from m3.protocols.chatlog import CHATLOG_TOOLS
from m3.protocols.inbox import INBOX_TOOLS, NOTIFICATION_TOOLS
from m3.protocols.memory import MEMORY_TOOLS
from m3.protocols.meta import META_TOOLS
from m3.protocols.tasks import TASK_TOOLS

ALL_TOOLS: tuple[ToolSpec, ...] = MEMORY_TOOLS + CHATLOG_TOOLS + META_TOOLS
# Coordination (issue 5): agents, handoffs and inboxes, notifications, shared task trees.
ALL_TOOLS += INBOX_TOOLS + AGENT_TOOLS + NOTIFICATION_TOOLS + TASK_TOOLS

__all__ = ["ALL_TOOLS", "Message", "ToolArgs", "ToolResult", "ToolSpec"]
