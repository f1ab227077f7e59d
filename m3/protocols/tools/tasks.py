"""Arguments, results and declarations of the ``task`` domain tools (shared task trees)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, ValidationInfo, computed_field, model_validator

from m3.errors import ConfirmationRequired, InvalidArgument
from m3.protocols.base import ToolArgs, ToolResult, ToolSpec
from m3.protocols.messages import coordination as msg
from m3.protocols.tools.agents import ActingAgent
from m3.protocols.tools.fields import MAX_STORE_INT, Identifier, JsonObject, MemoryId, Text, Timestamp, limit

TaskState = Literal["pending", "in_progress", "blocked", "completed", "failed", "cancelled"]
TaskId = Annotated[str, Field(min_length=8, max_length=36,
                              description="The task's id or a unique prefix of 8+ characters.")]
Version = Annotated[int, Field(ge=1, le=MAX_STORE_INT,
                               description="The version you read (from task_get, task_list or your last "
                                           "change of the task).")]


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


# --- create / assign / update / result / delete -------------------------------------------------

class TaskCreateArgs(ToolArgs):
    title: Text = Field(max_length=500)
    description: str | None = Field(None, max_length=20_000, description="What done looks like.")
    parent_id: str | None = Field(None, min_length=8, max_length=36, description="Makes this a subtask.")
    kind: str | None = Field(None, max_length=100, description="A label workers claim by, e.g. 'review'.")
    priority: int = Field(0, ge=-1000, le=1000, description="Higher is more urgent.")
    assignee: Identifier | None = Field(None, description="A registered agent to give it to now (notified).")
    metadata: JsonObject = Field(default_factory=dict)


TASK_CREATE = ToolSpec(
    name="task_create", domain="task", args=TaskCreateArgs, result=TaskRecord,
    message=msg.CreateTask, actor="writer",
    description=(
        "Add a task to the shared task tree, optionally under a parent task and assigned to an agent. Use it to "
        "split work that several agents share; workers take pending tasks with task_claim. It starts pending, "
        "at version 1."
    ),
)


class TaskAssignArgs(ToolArgs):
    id: TaskId
    version: Version
    assignee: Identifier | None = Field(description="The registered agent that owns the task now; null unassigns.")


TASK_ASSIGN = ToolSpec(
    name="task_assign", domain="task", args=TaskAssignArgs, result=TaskRecord,
    message=msg.AssignTask, actor="writer",
    description=(
        "Give a task to a specific agent (it and the task's creator are notified), or take it back with "
        "assignee=null. An assigned pending task can only be claimed by its assignee. Fails with 'conflict' if the "
        "task changed since the version you read."
    ),
)


class TaskUpdateArgs(ToolArgs):
    id: TaskId
    version: Version
    state: TaskState | None = Field(None, description="The new state (see the allowed moves above).")
    title: str | None = Field(None, min_length=1, max_length=500)
    description: str | None = Field(None, max_length=20_000)
    kind: str | None = Field(None, max_length=100)
    priority: int | None = Field(None, ge=-1000, le=1000)
    metadata: JsonObject | None = None
    reason: str | None = Field(None, max_length=2000, description="Why; kept in the task's history.")


TASK_UPDATE = ToolSpec(
    name="task_update", domain="task", args=TaskUpdateArgs, result=TaskRecord,
    message=msg.UpdateTask, actor="writer",
    description=(
        "Move a task through its states or edit it. Allowed moves: pending → in_progress, blocked or cancelled; "
        "in_progress → pending (give it back), blocked, completed, failed or cancelled; blocked → pending, "
        "in_progress, failed or cancelled; failed → pending (retry). Any other move is 'illegal_transition'. "
        "Pass the version you read: if someone changed the task since, you get 'conflict' (read it again), never "
        "a silent overwrite. While another agent holds the task under a valid lease only it may change the task "
        "('lease_held'). Completing, failing or cancelling notifies the owner and the creator."
    ),
)


class TaskSetResultArgs(ToolArgs):
    id: TaskId
    version: Version
    memory_id: MemoryId | None = Field(None, description="The memory that holds the result (write it first).")
    note: str | None = Field(None, max_length=20_000, description="A short outcome, e.g. 'merged as #412'.")

    @model_validator(mode="after")
    def _something(self) -> TaskSetResultArgs:
        if self.memory_id is None and self.note is None:
            raise InvalidArgument("give memory_id, note or both")  # passes validation as is
        return self


TASK_SET_RESULT = ToolSpec(
    name="task_set_result", domain="task", args=TaskSetResultArgs, result=TaskRecord,
    message=msg.SetTaskResult, actor="writer",
    description=(
        "Attach the outcome of a task: a link to the memory holding the result, and/or a short note. Do it "
        "before completing the task so that whoever reads it finds the result. With isolation on, the memory "
        "must be shared (scope 'user' or 'org'). Only the lease holder may, while a lease is valid ('lease_held')."
    ),
)


class TaskDeleteArgs(ToolArgs):
    id: TaskId
    version: Version
    hard: bool = Field(False, description="Erase the task, its subtasks and their history (after a soft delete).")
    confirm: bool = Field(False, description="Must be true for a hard delete.")
    reason: str | None = Field(None, max_length=2000)

    @model_validator(mode="after")
    def _confirmed(self) -> TaskDeleteArgs:
        if self.hard and not self.confirm:
            raise ConfirmationRequired(f"hard delete of task {self.id} needs confirm=true")  # passes validation as is
        return self


class TaskDeleteResult(TaskRecord):
    deleted: Literal["soft", "hard"]
    affected: int = Field(description="Tasks deleted, the subtasks included.")


TASK_DELETE = ToolSpec(
    name="task_delete", domain="task", args=TaskDeleteArgs, result=TaskDeleteResult, destructive=True,
    message=msg.DeleteTask, actor="writer",
    description=(
        "Delete a task and its subtasks. By default softly: hidden from lists, trees and claims but kept with "
        "its history (task_get still reads it). A soft-deleted task can then be erased for good with "
        "hard=true and confirm=true. Refused with 'lease_held' while another agent holds the task under a lease."
    ),
)


# --- reads --------------------------------------------------------------------------------------

class TaskGetArgs(ToolArgs):
    id: TaskId
    history: bool = Field(False, description="Also return every change with its actor and time.")


class TaskEvent(ToolResult):
    event: str
    actor: str | None
    at: Timestamp
    details: dict[str, Any]


class TaskDetails(TaskRecord):
    history: list[TaskEvent] | None = Field(None, exclude_if=lambda v: v is None)


TASK_GET = ToolSpec(
    name="task_get", domain="task", args=TaskGetArgs, result=TaskDetails, read_only=True,
    message=msg.GetTask, actor="tasks",
    description=(
        "Read one task with its current state, owner, lease, result and version; history=true adds every change "
        "with who made it. Read it before changing a task to get the version to pass."
    ),
)


class TaskListArgs(ToolArgs):
    state: TaskState | None = None
    kind: str | None = Field(None, max_length=100)
    owner: Identifier | None = Field(None, description="Tasks this agent is assigned or holds a lease on.")
    creator: Identifier | None = None
    parent_id: str | None = Field(None, min_length=8, max_length=36, description="Direct subtasks of this task.")
    include_deleted: bool = False
    limit: int = Field(50, ge=1, le=500)


class TaskListResult(ToolResult):
    count: int
    items: list[TaskRecord] = Field(description="Most urgent first, then oldest.")


TASK_LIST = ToolSpec(
    name="task_list", domain="task", args=TaskListArgs, result=TaskListResult, read_only=True,
    message=msg.ListTasks, actor="tasks",
    description=(
        "List shared tasks by state, kind, owner, creator or parent, most urgent first. A task whose lease ran "
        "out is listed as pending again."
    ),
)


class TaskTreeArgs(ToolArgs):
    id: TaskId
    depth: int = Field(3, ge=1, le=10, description="Levels of subtasks to include.")
    include_deleted: bool = False


class TaskNode(TaskRecord):
    child_count: int = Field(description="Direct subtasks, also those beyond the depth limit.")
    children: list[TaskNode]


class TaskTreeResult(ToolResult):
    tree: TaskNode = Field(description="The task asked for, its subtasks nested in children.")
    depth: int


TASK_TREE = ToolSpec(
    name="task_tree", domain="task", args=TaskTreeArgs, result=TaskTreeResult, read_only=True,
    message=msg.GetTaskTree, actor="tasks",
    description=(
        "Show a task with its subtasks down to a depth limit, to see how a shared piece of work stands. "
        "child_count tells where the tree goes deeper than shown."
    ),
)


# --- claims and leases --------------------------------------------------------------------------

def _lease(value: float | None, info: ValidationInfo) -> float:
    """A lease in seconds: left out, ``tasks.lease_s``; longer than ``tasks.max_lease_s`` is refused."""
    most: float = limit(info, "tasks.max_lease_s")
    lease: float = limit(info, "tasks.lease_s") if value is None else value
    if lease > most:
        raise InvalidArgument(f"a lease of {lease:g} s is longer than tasks.max_lease_s = {most:g} s",
                              hint="Ask for a shorter lease and renew it with task_heartbeat.")
    return lease


#: A lease argument; validated (its default too) by :func:`_lease`, so it is a float once validated.
Lease = Annotated[float | None, AfterValidator(_lease)]


class TaskClaimFilter(ToolArgs):
    kind: str | None = Field(None, max_length=100)
    parent_id: str | None = Field(None, min_length=8, max_length=36, description="Only direct subtasks of this.")
    creator: Identifier | None = None


class TaskClaimArgs(ToolArgs):
    agent_id: ActingAgent = None
    filter: TaskClaimFilter | None = Field(
        None, description="Which tasks to consider: {kind, parent_id, creator}; default every pending task.")
    lease: Lease = Field(None, gt=0, validate_default=True,
                         description="Seconds the claim lasts unless renewed; default tasks.lease_s.")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def among(self) -> msg.TaskFilter:
        """Which tasks ClaimTask considers."""
        want = self.filter or TaskClaimFilter()
        return msg.TaskFilter(kind=want.kind, parent_id=want.parent_id, creator=want.creator)


class TaskClaimResult(ToolResult):
    claimed: bool
    task: TaskRecord | None = Field(description="The task now in progress under your lease; null if none was free.")


TASK_CLAIM = ToolSpec(
    name="task_claim", domain="task", args=TaskClaimArgs, result=TaskClaimResult,
    message=msg.ClaimTask, actor="writer",
    description=(
        "Take the next pending task (most urgent first) for this agent under a lease, atomically: two agents "
        "never get the same task while its lease is valid. Renew the lease with task_heartbeat during long work; "
        "if it runs out, the task goes back to pending for someone else (its creator and you are notified). "
        "Finish with task_set_result and task_update(state='completed'). claimed=false means nothing was free."
    ),
)


class TaskHeartbeatArgs(ToolArgs):
    id: TaskId
    agent_id: ActingAgent = None
    lease: Lease = Field(None, gt=0, validate_default=True, description="Seconds from now; default tasks.lease_s.")


TASK_HEARTBEAT = ToolSpec(
    name="task_heartbeat", domain="task", args=TaskHeartbeatArgs, result=TaskRecord,
    message=msg.RenewLease, actor="writer",
    description=(
        "Renew your lease on a claimed task while you still work on it. Fails with 'lease_lost' if the lease "
        "already ran out or another agent holds the task: stop and claim again. A renewal does not change the "
        "task's version."
    ),
)

class TaskReleaseArgs(ToolArgs):
    id: TaskId
    agent_id: ActingAgent = None
    reason: str | None = Field(None, max_length=500, description="Why you give it back; kept in its history.")


TASK_RELEASE = ToolSpec(
    name="task_release", domain="task", args=TaskReleaseArgs, result=TaskRecord,
    message=msg.ReleaseTask, actor="writer",
    description=(
        "Give a task you claimed back before your lease runs out, when you cannot finish it (blocked, out of "
        "scope, shutting down): it returns to pending at once so another agent can claim it, its creator is "
        "notified and the reason is kept in its history. Fails with 'lease_lost' if you no longer hold it."
    ),
)

TASK_TOOLS: tuple[ToolSpec, ...] = (
    TASK_CREATE, TASK_ASSIGN, TASK_UPDATE, TASK_SET_RESULT, TASK_GET, TASK_LIST, TASK_TREE, TASK_DELETE,
    TASK_CLAIM, TASK_HEARTBEAT, TASK_RELEASE,
)
