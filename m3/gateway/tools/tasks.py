"""Handlers of the shared task tools: changes go to the Writer, reads to the task-tree manager."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from m3.errors import ConfirmationRequired, InvalidArgument
from m3.gateway.registry import Handler
from m3.gateway.tools.agents import acting
from m3.gateway.tools.inbox import reader, shareable
from m3.protocols.base import Message
from m3.protocols.messages.coordination import (
    AssignTask,
    ClaimTask,
    CreateTask,
    DeleteTask,
    GetTask,
    GetTaskTree,
    ListTasks,
    RenewLease,
    SetTaskResult,
    TaskChange,
    TaskFilter,
    UpdateTask,
)
from m3.protocols.tools import tasks as p

if TYPE_CHECKING:
    from m3.gateway.service import CallContext, Service


async def ask(svc: Service, message: Message) -> Any:
    """Changes go to the Writer, reads to the task-tree manager."""
    return await svc.ask(svc.system.writer if isinstance(message, TaskChange) else svc.system.tasks, message)


def lease_of(svc: Service, lease: float | None) -> float:
    limit: float = svc.config["tasks.max_lease_s"]
    value: float = svc.config["tasks.lease_s"] if lease is None else lease
    if value > limit:
        raise InvalidArgument(f"a lease of {value:g} s is longer than tasks.max_lease_s = {limit:g} s",
                              hint="Ask for a shorter lease and renew it with task_heartbeat.")
    return value


def record(found: dict[str, Any]) -> p.TaskRecord:
    return p.TaskRecord(**{k: v for k, v in found.items() if k in p.TaskRecord.model_fields})


async def _parent(svc: Service, ref: str | None) -> str | None:
    return None if ref is None else str((await ask(svc, GetTask(id=ref)))["id"])


async def task_create(svc: Service, a: p.TaskCreateArgs, ctx: CallContext) -> p.TaskRecord:
    return record(await ask(svc, CreateTask(
        title=a.title, description=a.description, parent_id=await _parent(svc, a.parent_id), kind=a.kind,
        priority=a.priority, assignee=a.assignee, metadata=a.metadata, actor=ctx.agent_id,
        reader=svc.read_filter(ctx))))


async def task_assign(svc: Service, a: p.TaskAssignArgs, ctx: CallContext) -> p.TaskRecord:
    return record(await ask(svc, AssignTask(id=a.id, version=a.version, assignee=a.assignee, actor=ctx.agent_id,
                                            reader=svc.read_filter(ctx))))


async def task_update(svc: Service, a: p.TaskUpdateArgs, ctx: CallContext) -> p.TaskRecord:
    changes = a.model_dump(include={"title", "description", "kind", "priority", "metadata"}, exclude_none=True)
    return record(await ask(svc, UpdateTask(id=a.id, version=a.version, state=a.state, changes=changes,
                                            reason=a.reason, actor=ctx.agent_id, reader=svc.read_filter(ctx))))


async def task_set_result(svc: Service, a: p.TaskSetResultArgs, ctx: CallContext) -> p.TaskRecord:
    if a.memory_id is None and a.note is None:
        raise InvalidArgument("give memory_id, note or both")
    memory_id = None
    if a.memory_id is not None:
        memory_id = (await shareable(svc, svc.read_filter(ctx), [a.memory_id], None))[0]
    return record(await ask(svc, SetTaskResult(id=a.id, version=a.version, memory_id=memory_id, note=a.note,
                                               actor=ctx.agent_id, reader=svc.read_filter(ctx))))


async def task_delete(svc: Service, a: p.TaskDeleteArgs, ctx: CallContext) -> p.TaskDeleteResult:
    if a.hard and not a.confirm:
        raise ConfirmationRequired(f"hard delete of task {a.id} needs confirm=true")
    found = await ask(svc, DeleteTask(id=a.id, version=a.version, hard=a.hard, reason=a.reason, actor=ctx.agent_id,
                                      reader=svc.read_filter(ctx)))
    return p.TaskDeleteResult(**{k: v for k, v in found.items() if k in p.TaskDeleteResult.model_fields})


async def task_get(svc: Service, a: p.TaskGetArgs, ctx: CallContext) -> p.TaskDetails:
    found = await ask(svc, GetTask(id=a.id, history=a.history, filter=svc.read_filter(ctx)))
    return p.TaskDetails(**found)


async def task_list(svc: Service, a: p.TaskListArgs, ctx: CallContext) -> p.TaskListResult:
    parent = await _parent(svc, a.parent_id)
    flt = TaskFilter(state=a.state, kind=a.kind, owner=a.owner, creator=a.creator, parent_id=parent,
                     include_deleted=a.include_deleted)
    found = await ask(svc, ListTasks(filter=flt, limit=a.limit, filter_memories=svc.read_filter(ctx)))
    return p.TaskListResult(count=len(found), items=[record(t) for t in found])


async def task_tree(svc: Service, a: p.TaskTreeArgs, ctx: CallContext) -> p.TaskTreeResult:
    found = await ask(svc, GetTaskTree(id=a.id, depth=a.depth, include_deleted=a.include_deleted,
                                       filter_memories=svc.read_filter(ctx)))
    return p.TaskTreeResult(tree=p.TaskNode(**found), depth=a.depth)


async def task_claim(svc: Service, a: p.TaskClaimArgs, ctx: CallContext) -> p.TaskClaimResult:
    agent = acting(ctx, a.agent_id)
    want = a.filter or p.TaskClaimFilter()
    flt = TaskFilter(kind=want.kind, parent_id=await _parent(svc, want.parent_id), creator=want.creator)
    found = await ask(svc, ClaimTask(agent_id=agent, filter=flt, lease_s=lease_of(svc, a.lease), actor=agent,
                                     reader=reader(svc, ctx, agent)))
    return p.TaskClaimResult(claimed=found is not None, task=None if found is None else record(found))


async def task_heartbeat(svc: Service, a: p.TaskHeartbeatArgs, ctx: CallContext) -> p.TaskRecord:
    agent = acting(ctx, a.agent_id)
    return record(await ask(svc, RenewLease(id=a.id, agent_id=agent, lease_s=lease_of(svc, a.lease), actor=agent,
                                            reader=reader(svc, ctx, agent))))


HANDLERS: dict[str, Handler] = {
    "task_create": task_create, "task_assign": task_assign, "task_update": task_update,
    "task_set_result": task_set_result, "task_get": task_get, "task_list": task_list, "task_tree": task_tree,
    "task_delete": task_delete, "task_claim": task_claim, "task_heartbeat": task_heartbeat,
}
