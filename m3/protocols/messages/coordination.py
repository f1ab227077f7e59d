"""Messages of the coordination actors: agents and tokens, inboxes and notifications, task trees.

Changes are Writer requests, their rules (recipients exist, task state machine, versions, leases) SQL
predicates in its transaction (docs/coordination.md says why); reads go to the Directory (agents, inboxes,
notifications, tokens) and the TaskManager (tasks). Messages only one actor uses are in that actor's module.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from pydantic import Field

from m3.protocols.base import Message, Request
from m3.protocols.messages.memory import Change, Filtered

if TYPE_CHECKING:  # the tool modules import these requests, so replies are named in strings (see Request)
    from m3.protocols.tools import agents, inbox, tasks  # noqa: F401

# --- agents and tokens (Writer) -----------------------------------------------------------------


class RegisterAgent(Request["agents.AgentRegisterResult"]):
    agent_id: str
    role: str | None = None
    description: str | None = None
    metadata: dict[str, Any] | None = None


class AgentHeartbeat(Request["agents.AgentRecord"]):
    agent_id: str


class AgentOffline(Request["agents.AgentRecord"]):
    agent_id: str


class CreateToken(Request[dict[str, Any]]):
    """Store a token's SHA-256 for ``agent_id`` (registering the agent if new). The token itself is never stored."""

    agent_id: str
    token_hash: str
    label: str | None = None


class RevokeTokens(Request[list[str]]):
    """Revoke one token by id, or every token of an agent."""

    token_id: str | None = None
    agent_id: str | None = None


# --- inboxes and notifications (Writer, through the receiver's router) --------------------------


class SendHandoff(Filtered, Request["inbox.MemoryHandoffResult"]):
    from_agent: str | None
    to_agent: str
    task: str
    note: str | None = None
    #: The task's id or a unique prefix of it (resolved in the Writer's transaction).
    task_id: str | None = None
    #: Memory ids or prefixes as ``filter`` (the sender's) sees them; with isolation on, each must be one
    #: the receiver may read (``not_shared``), checked in the Writer's transaction.
    context_ids: tuple[str, ...] = ()


class SendNotification(Request["inbox.NotifyResult"]):
    from_agent: str | None
    to_agent: str
    message: str
    kind: str = "message"
    data: dict[str, Any] = Field(default_factory=dict)


class AckInbox(Request["inbox.MemoryInboxAckResult"]):
    agent_id: str
    ids: tuple[str, ...]


class AckNotifications(Request["inbox.NotificationsAckResult"]):
    """Acknowledge some notifications of ``agent_id``, or all of them when ``ids`` is None."""

    agent_id: str
    ids: tuple[str, ...] | None = None


class WaitNotifications(Request[bool]):
    """Held by the agent's router until a notification for it commits, or ``deadline`` (monotonic) passes."""

    agent_id: str
    deadline: float


# --- reads of agents, inboxes, notifications, tokens (Directory) --------------------------------


class GetAgent(Request["agents.AgentDetails"]):
    id: str


class ListAgents(Request["agents.AgentListResult"]):
    status: str | None = None
    role: str | None = None


class ReadInbox(Filtered, Request["inbox.MemoryInboxResult"]):
    """The agent's handoffs; ``filter`` decides which of their context memories it sees."""

    agent_id: str
    unread_only: bool
    limit: int


class PollNotifications(Request["inbox.NotificationsResult"]):
    agent_id: str
    limit: int


class LookupToken(Request[str | None]):
    token_hash: str


class ListTokens(Request[list[dict[str, Any]]]):
    agent_id: str | None = None


# --- task trees (reads: TaskManager; changes: Writer) --------------------------------------------


class TaskFilter(Message):
    """Which tasks a listing or a claim considers."""

    state: str | None = None
    kind: str | None = None
    owner: str | None = None
    creator: str | None = None
    parent_id: str | None = None
    include_deleted: bool = False


class CreateTask(Change, Request["tasks.TaskRecord"]):
    title: str
    description: str | None = None
    parent_id: str | None = None
    kind: str | None = None
    priority: int = 0
    assignee: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class AssignTask(Change, Request["tasks.TaskRecord"]):
    id: str
    version: int
    assignee: str | None


class UpdateTask(Change, Request["tasks.TaskRecord"]):
    """A new state and/or new values of the editable fields (None: unchanged)."""

    id: str
    version: int
    state: str | None = None
    title: str | None = None
    description: str | None = None
    kind: str | None = None
    priority: int | None = None
    metadata: dict[str, Any] | None = None
    reason: str | None = None


class SetTaskResult(Change, Request["tasks.TaskRecord"]):
    id: str
    version: int
    memory_id: str | None
    note: str | None = None


class DeleteTask(Change, Request["tasks.TaskDeleteResult"]):
    id: str
    version: int
    hard: bool = False
    reason: str | None = None


class ClaimTask(Change, Request["tasks.TaskClaimResult"]):
    agent_id: str
    #: Which tasks it considers (``parent_id`` may be a prefix).
    among: TaskFilter
    lease: float


class RenewLease(Change, Request["tasks.TaskRecord"]):
    id: str
    agent_id: str
    lease: float


class ReleaseTask(Change, Request["tasks.TaskRecord"]):
    """The holder ``agent_id`` gives a task it holds under a valid lease back to pending, with a reason."""

    id: str
    agent_id: str
    reason: str | None = None


class ExpireLeases(Change, Request[datetime | None]):
    """Return every task whose lease has run out to pending; answered with the next expiry (or None).

    Sent by the TaskManager's lease clock; the Writer tells that clock when the leases it sets end.
    """


class GetTask(Filtered, Request["tasks.TaskDetails"]):
    id: str
    history: bool = False


class ListTasks(TaskFilter, Filtered, Request["tasks.TaskListResult"]):
    """The tasks its :class:`TaskFilter` fields admit (``parent_id`` may be a prefix)."""

    limit: int


class GetTaskTree(Filtered, Request["tasks.TaskTreeResult"]):
    id: str
    depth: int
    include_deleted: bool = False
