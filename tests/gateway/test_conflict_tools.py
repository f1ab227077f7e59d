"""The conflicts tools and the supersession notification through the service, with isolation on."""

from __future__ import annotations

from datetime import UTC, datetime
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


async def conflict_of_two(svc: Service, ctx: CallContext) -> tuple[str, str, str]:
    """Two look-alike memories of ``ctx``'s agent flagged as a conflict: (conflict id, memory_a, memory_b)."""
    first = await write_settled(svc, "Customer 4411 ordered 3 laptops.", ctx)
    second = await write_settled(svc, "Customer 4412 ordered 3 laptops.", ctx)
    [found] = (await svc.call("conflicts_list", {}, ctx))["items"]
    assert (found["memory_a"], found["memory_b"]) == (first["id"], second["id"])
    return found["id"], first["id"], second["id"]


async def test_merge_writes_one_new_memory_that_supersedes_both_and_as_of_still_sees_the_two(
        closed: Service) -> None:
    conflict_id, a, b = await conflict_of_two(closed, A)
    before = datetime.now(UTC).isoformat()
    merged_text = "Customer 4411 (also known as 4412) ordered 3 laptops."
    done = await closed.call("conflicts_resolve", {"id": conflict_id, "resolution": "merge", "content": merged_text,
                                                   "title": "laptop order"}, A)
    await trio.to_thread.run_sync(closed.system.wait_embedded)
    merged = done["merged_into"]
    assert (done["status"], done["resolution"], done["resolved_by"]) == ("resolved", "merge", "agent-a")
    for side in (a, b):
        events = [(e["event"], e["details"]) for e in (await closed.call("memory_history", {"id": side}, A))["events"]]
        assert ("superseded", {"by": merged, "how": "conflict", "reason": f"conflict {conflict_id} resolved merge",
                               "conflict": conflict_id}) in events
        assert ("conflict_resolved", {"conflict": conflict_id, "resolution": "merge"}) in events
    created = (await closed.call("memory_history", {"id": merged}, A))["events"][0]
    assert (created["event"], created["actor"], created["details"]["supersedes"]) == ("created", "agent-a", [a, b])
    query = {"query": "customer ordered laptops", "k": 8}
    now = {item["id"]: item for item in (await closed.call("memory_search", query, A))["items"]}
    then = {item["id"]: item for item in (await closed.call("memory_search", {**query, "as_of": before}, A))["items"]}
    assert merged in now and not {a, b} & set(now)
    assert (now[merged]["content"], now[merged]["title"], now[merged]["type"], now[merged]["agent_id"]) == (
        merged_text, "laptop order", "fact", "agent-a")
    assert {a, b} <= set(then) and merged not in then
    assert all(then[side]["retired_at"] is not None for side in (a, b))  # found as of then, retired since
    listed = (await closed.call("conflicts_list", {"status": "resolved"}, A))["items"]
    assert [(c["id"], c["merged_into"]) for c in listed] == [(conflict_id, merged)]


@pytest.mark.parametrize(("args", "says"), [
    ({"resolution": "merge"}, "resolution merge needs the merged memory's content"),
    ({"resolution": "keep_a", "content": "Customer 4411 ordered 3 laptops."},
     "content and title belong to resolution merge"),
    ({"resolution": "keep_both", "title": "orders"}, "content and title belong to resolution merge"),
])
async def test_merge_without_content_or_content_with_another_resolution_is_refused_and_changes_nothing(
        closed: Service, args: dict[str, Any], says: str) -> None:
    conflict_id, a, b = await conflict_of_two(closed, A)
    with pytest.raises(M3Error) as raised:
        await closed.call("conflicts_resolve", {"id": conflict_id, **args}, A)
    assert raised.value.code == "invalid_argument" and says in raised.value.message
    assert raised.value.hint
    [still] = (await closed.call("conflicts_list", {}, A))["items"]
    assert (still["id"], still["status"]) == (conflict_id, "open")
    current = {item["id"] for item in (await closed.call("memory_search", {"query": "customer laptops"}, A))["items"]}
    assert {a, b} <= current
