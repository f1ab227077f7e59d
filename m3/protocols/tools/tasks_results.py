"""Results of the ``task`` domain tools: what the Writer and the TaskManager answer, as the caller gets it.

Apart from :mod:`m3.protocols.tools.tasks` (the arguments and declarations) because the actor
requests in :mod:`m3.protocols.messages.coordination` name these as their replies.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from m3.protocols.base import ToolResult
from m3.protocols.tools.fields import Timestamp

TaskState = Literal["pending", "in_progress", "blocked", "completed", "failed", "cancelled"]


class TaskRecord(ToolResult):
    id: str
    parent_id: str | None
    title: str
    description: str | None
    kind: str | None
    priority: int
    state: TaskState
    creator: str | None
    owner: str | None = Field(description="The assignee or the lease holder.")
    lease_expires_at: Timestamp | None = Field(description="When the owner's claim ends unless renewed.")
    result_memory_id: str | None = Field(description="The result memory, when this reader may see it.")
    result_note: str | None
    metadata: dict[str, Any]
    version: int = Field(description="Pass it back with your next change of this task.")
    created_at: Timestamp
    updated_at: Timestamp
    deleted_at: Timestamp | None


class TaskDeleteResult(TaskRecord):
    deleted: Literal["soft", "hard"]
    affected: int = Field(description="Tasks deleted, the subtasks included.")


class TaskEvent(ToolResult):
    event: str
    actor: str | None
    at: Timestamp
    details: dict[str, Any]


class TaskDetails(TaskRecord):
    history: list[TaskEvent] | None = Field(None, exclude_if=lambda v: v is None)


class TaskListResult(ToolResult):
    count: int
    items: list[TaskRecord] = Field(description="Most urgent first, then oldest.")


class TaskNode(TaskRecord):
    child_count: int = Field(description="Direct subtasks, also those beyond the depth limit.")
    children: list[TaskNode]


class TaskTreeResult(ToolResult):
    tree: TaskNode = Field(description="The task asked for, its subtasks nested in children.")
    depth: int


class TaskClaimResult(ToolResult):
    claimed: bool
    task: TaskRecord | None = Field(description="The task now in progress under your lease; null if none was free.")
