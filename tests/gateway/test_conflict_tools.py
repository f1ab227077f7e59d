"""The conflicts tools and the supersession notification through the service, with isolation on."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from m3.actors.system import ActorSystem
from m3.config import Config
from m3.errors import M3Error
from m3.gateway.registry import default_registry
from m3.gateway.service import CallContext, Service

pytestmark = pytest.mark.anyio

WAIT_S = 30.0
A, B = CallContext(agent_id="agent-a"), CallContext(agent_id="agent-b")


@pytest.fixture
def closed(config: Config, system: ActorSystem) -> Service:
    """A service with isolation enforced: private memories (and their conflicts) belong to their agent."""
    return Service(config.with_overrides(isolation__enforce=True), system, default_registry())


async def write_settled(svc: Service, content: str, ctx: CallContext, **args: Any) -> dict[str, Any]:
    written: dict[str, Any] = await svc.call("memory_write", {"content": content, "type": "fact", **args}, ctx)
    await trio.to_thread.run_sync(svc.system.wait_embedded)
    return written


async def test_a_private_conflict_is_listed_and_resolved_by_its_agent_only(closed: Service) -> None:
    await write_settled(closed, "Customer 4411 ordered 3 laptops.", A)
    await write_settled(closed, "Customer 4412 ordered 3 laptops.", A)
    mine = await closed.call("conflicts_list", {}, A)
    assert mine["count"] == 1
    assert (await closed.call("conflicts_list", {}, B))["count"] == 0
    conflict_id = mine["items"][0]["id"]
    with pytest.raises(M3Error) as raised:
        await closed.call("conflicts_resolve", {"id": conflict_id, "resolution": "keep_a"}, B)
    assert raised.value.code == "not_found"
    done = await closed.call("conflicts_resolve", {"id": conflict_id, "resolution": "keep_both"}, A)
    assert (done["status"], done["resolved_by"]) == ("resolved", "agent-a")


async def test_a_writer_waiting_for_notifications_is_woken_by_the_supersession_of_its_write(
        closed: Service) -> None:
    old = await write_settled(closed, "The API uses the old PostgreSQL version", A)
    woke: dict[str, Any] = {}

    async def waits(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        woke.update(await closed.call("notifications_wait", {"timeout": WAIT_S}, A))

    with trio.fail_after(WAIT_S / 2):
        async with trio.open_nursery() as nursery:
            await nursery.start(waits)
            new = await closed.call("memory_write", {"content": "The API uses the newest PostgreSQL version",
                                                     "type": "fact"}, A)
    assert woke["timed_out"] is False
    [note] = woke["items"]
    assert (note["kind"], note["data"]["memory_id"], note["data"]["superseded"]) == (
        "superseded", new["id"], old["id"])
