"""Handlers of the task tools that do more than send one request (the rest are declarations).

Changes go to the Writer, reads to the task-tree manager; task ids and prefixes are resolved there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from m3.errors import InvalidArgument
from m3.gateway.registry import acting
from m3.gateway.tools.inbox import shareable
from m3.protocols.messages.coordination import ClaimTask, RenewLease, SetTaskResult, TaskFilter
from m3.protocols.tools import tasks as p
from m3.protocols.tools.tasks import TaskClaimResult, TaskRecord

if TYPE_CHECKING:
    from m3.gateway.service import CallContext, Service


def lease_of(svc: Service, lease: float | None) -> float:
    limit: float = svc.config["tasks.max_lease_s"]
    value: float = svc.config["tasks.lease_s"] if lease is None else lease
    if value > limit:
        raise InvalidArgument(f"a lease of {value:g} s is longer than tasks.max_lease_s = {limit:g} s",
                              hint="Ask for a shorter lease and renew it with task_heartbeat.")
    return value


async def task_set_result(svc: Service, a: p.TaskSetResultArgs, ctx: CallContext) -> TaskRecord:
    """A handler: the result memory must be one every agent may read (checked before the change)."""
    if a.memory_id is None and a.note is None:
        raise InvalidArgument("give memory_id, note or both")
    readable = svc.read_filter(ctx.agent_id)
    memory_id = None
    if a.memory_id is not None:
        memory_id = (await shareable(svc, readable, [a.memory_id], None))[0]
    return await svc.ask(svc.system.writer, SetTaskResult(id=a.id, version=a.version, memory_id=memory_id,
                                                          note=a.note, actor=ctx.agent_id, filter=readable))


async def task_claim(svc: Service, a: p.TaskClaimArgs, ctx: CallContext) -> TaskClaimResult:
    agent = acting(ctx, a.agent_id)
    want = a.filter or p.TaskClaimFilter()
    among = TaskFilter(kind=want.kind, parent_id=want.parent_id, creator=want.creator)
    return await svc.ask(svc.system.writer, ClaimTask(agent_id=agent, among=among, lease_s=lease_of(svc, a.lease),
                                                      actor=agent, filter=svc.read_filter(agent)))


async def task_heartbeat(svc: Service, a: p.TaskHeartbeatArgs, ctx: CallContext) -> TaskRecord:
    agent = acting(ctx, a.agent_id)
    return await svc.ask(svc.system.writer, RenewLease(id=a.id, agent_id=agent, lease_s=lease_of(svc, a.lease),
                                                       actor=agent, filter=svc.read_filter(agent)))
