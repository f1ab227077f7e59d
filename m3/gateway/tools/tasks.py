"""Handlers of the task tools that do more than send one request (the rest are declarations).

Changes go to the Writer, reads to the task-tree manager; task ids and prefixes are resolved there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from m3.errors import InvalidArgument
from m3.gateway.tools.inbox import shareable
from m3.protocols.messages.coordination import SetTaskResult
from m3.protocols.tools import tasks as p
from m3.protocols.tools.tasks import TaskRecord

if TYPE_CHECKING:
    from m3.gateway.service import CallContext, Service


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

