"""Handoffs, inboxes and notifications through the service, on each store.

The waits are real: ``notifications_wait`` parks at the receiver's router
actor and must be woken by the commit of a handoff, well before its own
timeout.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from m3.actors.system import ActorSystem
from m3.config import Config
from m3.errors import M3Error
from m3.gateway.registry import default_registry
from m3.gateway.service import CallContext, Service

pytestmark = pytest.mark.anyio

WAIT_S = 30.0  # the wait's own timeout; the tests require an answer in far less


def as_agent(name: str, bound: bool = False) -> CallContext:
    return CallContext(agent_id=name, bound=bound)


A, B, C = as_agent("agent-a"), as_agent("agent-b"), as_agent("agent-c")


async def register(service: Service, *contexts: CallContext) -> None:
    for ctx in contexts:
        await service.call("agent_register", {}, ctx)


async def error_of(service: Service, tool: str, args: dict[str, Any], ctx: CallContext) -> M3Error:
    with pytest.raises(M3Error) as raised:
        await service.call(tool, args, ctx)
    return raised.value


async def test_a_handoff_lands_unread_with_its_context_wakes_a_waiting_receiver_and_the_ack_clears_it(
        service: Service) -> None:
    await register(service, A, B)
    fact = await service.call("memory_write", {"content": "The staging database is db-7.", "scope": "user"}, A)
    woke: dict[str, Any] = {}

    async def receiver_waits(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        woke.update(await service.call("notifications_wait", {"timeout": WAIT_S}, B))

    with trio.fail_after(WAIT_S / 3):  # far below the wait's own timeout: it was woken, not timed out
        async with trio.open_nursery() as nursery:
            await nursery.start(receiver_waits)
            sent = await service.call("memory_handoff", {
                "to_agent": "agent-b", "task": "Migrate staging to PostgreSQL 18.",
                "context_ids": [fact["id"][:8]], "note": "Backups are done."}, A)
    assert woke["timed_out"] is False
    assert [(n["kind"], n["ref_id"]) for n in woke["items"]] == [("handoff", sent["id"])]

    inbox = await service.call("memory_inbox", {}, B)
    assert [item["id"] for item in inbox["items"]] == [sent["id"]]
    item = inbox["items"][0]
    assert (item["from_agent"], item["task"], item["note"]) == ("agent-a", "Migrate staging to PostgreSQL 18.",
                                                                "Backups are done.")
    assert [(c["id"], c["content"], c["current"]) for c in item["context"]] == [
        (fact["id"], "The staging database is db-7.", True)]

    assert (await service.call("memory_inbox_ack", {"ids": [sent["id"]]}, B))["acked"] == [sent["id"]]
    assert (await service.call("memory_inbox", {}, B))["count"] == 0
    everything = await service.call("memory_inbox", {"unread_only": False}, B)
    assert everything["items"][0]["read_at"] is not None
    # Acknowledging the handoff acknowledged its notification too; a second ack changes nothing.
    assert (await service.call("notifications_poll", {}, B))["count"] == 0
    assert (await service.call("memory_inbox_ack", {"ids": [sent["id"]]}, B))["acked"] == []


async def test_a_wait_with_notifications_pending_returns_them_at_once_and_an_empty_wait_times_out(
        service: Service) -> None:
    await register(service, A, B)
    await service.call("notify", {"to_agent": "agent-b", "message": "review ready", "kind": "review_ready",
                                  "data": {"pr": 412}}, A)
    with trio.fail_after(WAIT_S / 3):
        found = await service.call("notifications_wait", {"timeout": WAIT_S}, B)
    assert found["timed_out"] is False
    assert [(n["kind"], n["message"], n["data"], n["from_agent"]) for n in found["items"]] == [
        ("review_ready", "review ready", {"pr": 412}, "agent-a")]
    assert (await service.call("notifications_ack", {"ids": [found["items"][0]["id"]]}, B))["acked"] == 1
    empty = await service.call("notifications_wait", {"timeout": 0.05}, B)
    assert (empty["count"], empty["timed_out"]) == (0, True)


async def test_waits_of_several_agents_each_wake_only_for_their_own_notifications(service: Service) -> None:
    await register(service, A, B, C)
    results: dict[str, dict[str, Any]] = {}

    async def wait_for(ctx: CallContext, timeout: float) -> None:
        results[str(ctx.agent_id)] = await service.call("notifications_wait", {"timeout": timeout}, ctx)

    with trio.fail_after(WAIT_S / 3):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(wait_for, B, WAIT_S)
            nursery.start_soon(wait_for, C, 0.5)
            await trio.testing.wait_all_tasks_blocked()
            await service.call("notify", {"to_agent": "agent-b", "message": "only for b"}, A)
    assert results["agent-b"]["count"] == 1
    assert (results["agent-c"]["count"], results["agent-c"]["timed_out"]) == (0, True)


async def test_ack_all_acknowledges_every_pending_notification_of_the_agent_only(service: Service) -> None:
    await register(service, A, B, C)
    for text in ("one", "two", "three"):
        await service.call("notify", {"to_agent": "agent-b", "message": text}, A)
    await service.call("notify", {"to_agent": "agent-c", "message": "for c"}, A)
    assert (await service.call("notifications_ack_all", {}, B))["acked"] == 3
    assert (await service.call("notifications_poll", {}, B))["count"] == 0
    assert (await service.call("notifications_poll", {}, C))["count"] == 1


async def test_sending_to_an_unregistered_agent_is_not_found_with_the_closest_names(service: Service) -> None:
    await register(service, A, B)
    error = await error_of(service, "memory_handoff", {"to_agent": "agent-bb", "task": "x"}, A)
    assert error.code == "not_found"
    assert "agent-b" in error.details["did_you_mean"]
    assert (await error_of(service, "notify", {"to_agent": "nobody", "message": "x"}, A)).code == "not_found"


async def test_acking_a_handoff_of_another_agent_is_not_found_and_changes_nothing(service: Service) -> None:
    await register(service, A, B, C)
    sent = await service.call("memory_handoff", {"to_agent": "agent-b", "task": "x"}, A)
    assert (await error_of(service, "memory_inbox_ack", {"ids": [sent["id"]]}, C)).code == "not_found"
    assert (await service.call("memory_inbox", {}, B))["count"] == 1


async def test_a_handoff_naming_a_missing_memory_or_task_writes_nothing(service: Service) -> None:
    await register(service, A, B)
    assert (await error_of(service, "memory_handoff", {"to_agent": "agent-b", "task": "x",
                                                       "context_ids": ["deadbeef00"]}, A)).code == "not_found"
    assert (await error_of(service, "memory_handoff", {"to_agent": "agent-b", "task": "x",
                                                       "task_id": "deadbeef00"}, A)).code == "not_found"
    assert (await service.call("memory_inbox", {"unread_only": False}, B))["count"] == 0
    assert (await service.call("notifications_poll", {}, B))["count"] == 0


async def test_task_assignment_and_completion_notify_the_owner_and_the_creator_but_not_the_actor(
        service: Service) -> None:
    await register(service, A, B, C)
    task = await service.call("task_create", {"title": "Write the release notes"}, A)
    task = await service.call("task_assign", {"id": task["id"], "version": task["version"],
                                              "assignee": "agent-b"}, C)
    kinds = {name: [n["kind"] for n in (await service.call("notifications_poll", {}, ctx))["items"]]
             for name, ctx in (("a", A), ("b", B), ("c", C))}
    assert kinds == {"a": ["task_assigned"], "b": ["task_assigned"], "c": []}
    for ctx in (A, B):
        await service.call("notifications_ack_all", {}, ctx)
    task = await service.call("task_update", {"id": task["id"], "version": task["version"], "state": "in_progress"},
                              B)
    await service.call("task_update", {"id": task["id"], "version": task["version"], "state": "completed"}, B)
    done = (await service.call("notifications_poll", {}, A))["items"]
    assert [(n["kind"], n["ref_id"], n["from_agent"]) for n in done] == [("task_completed", task["id"], "agent-b")]
    assert (await service.call("notifications_poll", {}, B))["count"] == 0


@pytest.fixture
def isolated(config: Config) -> Config:
    return config.with_overrides(isolation__enforce=True)


async def test_with_isolation_a_private_memory_cannot_be_handed_over_and_nothing_is_written(
        isolated: Config, system: ActorSystem) -> None:
    service = Service(isolated, system, default_registry())
    await register(service, A, B)
    private = await service.call("memory_write", {"content": "My own scratch notes."}, A)
    error = await error_of(service, "memory_handoff", {"to_agent": "agent-b", "task": "x",
                                                       "context_ids": [private["id"]]}, A)
    assert error.code == "not_shared"
    assert (await service.call("memory_inbox", {"unread_only": False}, B))["count"] == 0
    shared = await service.call("memory_write", {"content": "Shared notes.", "scope": "org"}, A)
    sent = await service.call("memory_handoff", {"to_agent": "agent-b", "task": "x",
                                                 "context_ids": [shared["id"]]}, A)
    assert sent["context_ids"] == [shared["id"]]
