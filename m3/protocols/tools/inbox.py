"""Handoffs, inboxes (``memory`` domain) and notifications (``notifications`` domain)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from m3.protocols.base import ToolArgs, ToolResult, ToolSpec
from m3.protocols.messages import coordination as msg
from m3.protocols.tools.agents import ActingAgent, ActingAgentArgs
from m3.protocols.tools.fields import Identifier, JsonObject, MemoryId, Text, Timestamp

MAX_CONTEXT = 50
MAX_IDS = 500


# --- memory_handoff / memory_inbox / memory_inbox_ack -------------------------------------------

class MemoryHandoffArgs(ToolArgs):
    to_agent: Identifier = Field(description="The registered agent that takes the work over.")
    task: Text = Field(description="What the receiver should do, stated so it can start without asking.")
    context_ids: list[MemoryId] = Field(default_factory=list, max_length=MAX_CONTEXT,
                                        description="Memories the receiver needs; linked to the handoff.")
    note: str | None = Field(None, max_length=20_000, description="Anything else: state, caveats, where you stopped.")
    task_id: str | None = Field(None, min_length=8, max_length=36, description="A shared task this work belongs to.")
    from_agent: ActingAgent = None


class MemoryHandoffResult(ToolResult):
    id: str = Field(description="The handoff's id in the receiver's inbox.")
    to_agent: str
    from_agent: str | None
    created_at: Timestamp
    context_ids: list[str]
    notification_id: str


MEMORY_HANDOFF = ToolSpec(
    name="memory_handoff", domain="memory", args=MemoryHandoffArgs, result=MemoryHandoffResult,
    message=msg.SendHandoff, actor="routers",
    description=(
        "Hand a piece of work to another agent: it lands in that agent's inbox with 'handoff' links to the "
        "memories it needs, and the agent is notified at once (a notifications_wait returns). Use it when "
        "another agent should continue or take over; write the context worth keeping with memory_write first, "
        "with scope 'user' or 'org' (isolation is on by default: a private memory can be handed over only to an "
        "agent it is shared with, see memory_share)."
    ),
)


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


class MemoryInboxArgs(ToolArgs):
    agent_id: ActingAgent = None
    unread_only: bool = Field(True, description="Only handoffs not acknowledged yet.")
    limit: int = Field(20, ge=1, le=200)


class MemoryInboxResult(ToolResult):
    count: int
    items: list[InboxItem] = Field(description="Newest first.")


MEMORY_INBOX = ToolSpec(
    name="memory_inbox", domain="memory", args=MemoryInboxArgs, result=MemoryInboxResult, read_only=True,
    message=msg.ReadInbox, actor="directory",
    description=(
        "Read the work other agents handed to this agent: each handoff with its task, note and context "
        "memories. Check it when a session starts and when notified of a handoff; acknowledge what you took "
        "on with memory_inbox_ack so that it leaves the unread view."
    ),
    audit=lambda res: (('memory', c.id) for item in res.items for c in item.context),
)


class MemoryInboxAckArgs(ToolArgs):
    ids: list[str] = Field(min_length=1, max_length=MAX_IDS, description="Handoff ids from memory_inbox.")
    agent_id: ActingAgent = None


class MemoryInboxAckResult(ToolResult):
    acked: list[str] = Field(description="The handoffs marked read now (ones read before are not repeated).")


MEMORY_INBOX_ACK = ToolSpec(
    name="memory_inbox_ack", domain="memory", args=MemoryInboxAckArgs, result=MemoryInboxAckResult,
    message=msg.AckInbox, actor="writer",
    description=(
        "Mark handoffs as read once you have taken them on; they leave the unread inbox (and their "
        "notifications are acknowledged too) but stay readable with unread_only=false."
    ),
)


# --- notifications ------------------------------------------------------------------------------

class Notification(ToolResult):
    id: str
    kind: str = Field(description="message (or the sender's own label), handoff, task_assigned, task_completed, "
                                  "task_failed, task_cancelled, lease_expired.")
    from_agent: str | None
    message: str
    ref_id: str | None = Field(description="The handoff or task it is about, if any.")
    data: dict[str, Any]
    created_at: Timestamp


class NotifyArgs(ToolArgs):
    to_agent: Identifier = Field(description="The registered agent to tell.")
    message: Text = Field(description="What the other agent should know.")
    kind: str = Field("message", min_length=1, max_length=32, pattern=r"^[a-z][a-z0-9_]*$",
                      description="A short label receivers can act on, e.g. 'review_requested'.")
    data: JsonObject = Field(default_factory=dict, description="Any JSON object for the receiver.")
    from_agent: ActingAgent = None


class NotifyResult(ToolResult):
    id: str
    to_agent: str
    created_at: Timestamp


NOTIFY = ToolSpec(
    name="notify", domain="notifications", args=NotifyArgs, result=NotifyResult,
    message=msg.SendNotification, actor="routers",
    description=(
        "Send a short message to another agent, e.g. that a review is ready or a shared file changed. It wakes "
        "the receiver's notifications_wait at once. For work the receiver should take over, use memory_handoff."
    ),
)


class NotificationsPollArgs(ToolArgs):
    agent_id: ActingAgent = None
    limit: int = Field(50, ge=1, le=500)


class NotificationsResult(ToolResult):
    count: int
    items: list[Notification] = Field(description="Unacknowledged notifications, oldest first.")


NOTIFICATIONS_POLL = ToolSpec(
    name="notifications_poll", domain="notifications", args=NotificationsPollArgs, result=NotificationsResult,
    read_only=True,
    message=msg.PollNotifications, actor="directory",
    description=(
        "Read this agent's unacknowledged notifications (handoffs, task assignments and completions, messages) "
        "without waiting. Use it between steps of work; to wait for the next one, use notifications_wait."
    ),
)


class NotificationsAckArgs(ToolArgs):
    ids: list[str] = Field(min_length=1, max_length=MAX_IDS, description="Notification ids from poll or wait.")
    agent_id: ActingAgent = None


class NotificationsAckResult(ToolResult):
    acked: int = Field(description="How many were acknowledged now.")


NOTIFICATIONS_ACK = ToolSpec(
    name="notifications_ack", domain="notifications", args=NotificationsAckArgs, result=NotificationsAckResult,
    message=msg.AckNotifications, actor="writer",
    description="Acknowledge notifications you have handled, so that poll and wait stop returning them.",
)


NOTIFICATIONS_ACK_ALL = ToolSpec(
    name="notifications_ack_all", domain="notifications", args=ActingAgentArgs,
    result=NotificationsAckResult, message=msg.AckNotifications, actor="writer",
    description="Acknowledge every pending notification of this agent at once, e.g. after catching up.",
)


class NotificationsWaitArgs(ToolArgs):
    agent_id: ActingAgent = None
    timeout: float = Field(30.0, ge=0, le=600, description="Longest wait in seconds; 0 only looks.")
    limit: int = Field(50, ge=1, le=500)


class NotificationsWaitResult(NotificationsResult):
    timed_out: bool = Field(description="True when nothing arrived within the timeout.")


NOTIFICATIONS_WAIT = ToolSpec(
    name="notifications_wait", domain="notifications", args=NotificationsWaitArgs, result=NotificationsWaitResult,
    read_only=True,
    description=(
        "Wait until this agent gets a notification (a handoff, a task assignment or completion, a message) and "
        "return it the moment it arrives; returns at once if some are pending, and empty with timed_out=true "
        "after the timeout. Use it when idle instead of polling in a loop."
    ),
)

INBOX_TOOLS: tuple[ToolSpec, ...] = (MEMORY_HANDOFF, MEMORY_INBOX, MEMORY_INBOX_ACK)
NOTIFICATION_TOOLS: tuple[ToolSpec, ...] = (
    NOTIFY, NOTIFICATIONS_POLL, NOTIFICATIONS_ACK, NOTIFICATIONS_ACK_ALL, NOTIFICATIONS_WAIT,
)
