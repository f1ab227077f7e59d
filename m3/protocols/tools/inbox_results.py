"""Results of handoffs, inboxes and notifications: what the Writer and the Directory answer.

Apart from :mod:`m3.protocols.tools.inbox` (the arguments and declarations) because the actor
requests in :mod:`m3.protocols.messages.coordination` name these as their replies.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from m3.protocols.base import ToolResult
from m3.protocols.tools.fields import Timestamp


class MemoryHandoffResult(ToolResult):
    id: str = Field(description="The handoff's id in the receiver's inbox.")
    to_agent: str
    from_agent: str | None
    created_at: Timestamp
    context_ids: list[str]
    notification_id: str


class ContextMemory(ToolResult):
    id: str
    type: str
    title: str | None
    content: str = Field(description="The first 500 characters; memory_get reads the whole memory.")
    scope: str
    agent_id: str | None
    current: bool = Field(description="False when the memory was superseded or deleted since the handoff.")


class InboxItem(ToolResult):
    id: str
    from_agent: str | None
    task: str
    note: str | None
    task_id: str | None
    created_at: Timestamp
    read_at: Timestamp | None
    context: list[ContextMemory] = Field(description="The linked memories this reader may see.")


class MemoryInboxResult(ToolResult):
    count: int
    items: list[InboxItem] = Field(description="Newest first.")


class MemoryInboxAckResult(ToolResult):
    acked: list[str] = Field(description="The handoffs marked read now (ones read before are not repeated).")


class Notification(ToolResult):
    id: str
    kind: str = Field(description="message (or the sender's own label), handoff, task_assigned, task_completed, "
                                  "task_failed, task_cancelled, lease_expired.")
    from_agent: str | None
    message: str
    ref_id: str | None = Field(description="The handoff or task it is about, if any.")
    data: dict[str, Any]
    created_at: Timestamp


class NotifyResult(ToolResult):
    id: str
    to_agent: str
    created_at: Timestamp


class NotificationsResult(ToolResult):
    count: int
    items: list[Notification] = Field(description="Unacknowledged notifications, oldest first.")


class NotificationsAckResult(ToolResult):
    acked: int = Field(description="How many were acknowledged now.")


class NotificationsWaitResult(NotificationsResult):
    timed_out: bool = Field(description="True when nothing arrived within the timeout.")
