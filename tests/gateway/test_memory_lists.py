"""memory_write_bulk, memory_list and memory_stats through the service and the command line, on each store:
a bulk write is one transaction (all or none), listing pages newest first, and both see only what the caller
may read."""

from __future__ import annotations

import json
from typing import Any

import pytest

from m3.errors import M3Error
from m3.gateway.service import CallContext, Service
from m3.protocols.tools.memory_lists import MAX_BULK
from tests.gateway.outcomes import Run

A, B = CallContext(agent_id="agent-a"), CallContext(agent_id="agent-b")


def notes(*contents: str, **extra: Any) -> list[dict[str, Any]]:
    return [{"content": c, **extra} for c in contents]


@pytest.mark.anyio
async def test_bulk_writes_every_item_in_order_and_does_not_duplicate_an_identical_one(service: Service) -> None:
    done = await service.call("memory_write_bulk", {"memories": notes(
        "The boiler is serviced in October.", "The spare key is with the neighbour.")}, A)
    assert (done["count"], done["created"]) == (2, 2)
    again = await service.call("memory_write_bulk", {"memories": notes(
        "The spare key is with the neighbour.", "The bins go out on Tuesday.")}, A)
    assert (again["count"], again["created"]) == (2, 1)
    assert again["items"][0]["id"] == done["items"][1]["id"] and not again["items"][0]["created"]
    got = await service.call("memory_get", {"id": again["items"][1]["id"]}, A)
    assert (got["content"], got["agent_id"]) == ("The bins go out on Tuesday.", "agent-a")


@pytest.mark.anyio
async def test_bulk_with_one_bad_item_writes_nothing(service: Service) -> None:
    bad = [*notes("A walrus fact that must not land."), {"content": "typed wrong", "type": "no_such_type"}]
    with pytest.raises(M3Error) as raised:
        await service.call("memory_write_bulk", {"memories": bad}, A)
    assert raised.value.code == "unknown_memory_type"
    with pytest.raises(M3Error) as raised:
        await service.call("memory_write_bulk", {"memories": notes(*(f"n{i}" for i in range(MAX_BULK + 1)))}, A)
    assert raised.value.code == "field_too_large"
    assert (await service.call("memory_stats", {}, A))["current"] == 0


@pytest.mark.anyio
async def test_a_token_bound_caller_cannot_bulk_write_as_another_agent(service: Service) -> None:
    with pytest.raises(M3Error) as raised:
        await service.call("memory_write_bulk", {"memories": notes("x", agent_id="agent-a")},
                           CallContext(agent_id="agent-b", bound=True))
    assert raised.value.code == "forbidden"
    assert (await service.call("memory_stats", {}, A))["current"] == 0


@pytest.mark.anyio
async def test_list_pages_newest_first_and_shows_retired_versions_only_when_asked(service: Service) -> None:
    ids = [item["id"] for item in (await service.call("memory_write_bulk", {"memories": notes(
        *(f"Fact number {i} about the garden." for i in range(5)))}, A))["items"]]
    await service.call("memory_delete", {"id": ids[0]}, A)
    first = await service.call("memory_list", {"limit": 2}, A)
    assert [item["id"] for item in first["items"]] == [ids[4], ids[3]]
    rest = await service.call("memory_list", {"limit": 10, "before": first["next_before"]}, A)
    assert [item["id"] for item in rest["items"]] == [ids[2], ids[1]] and rest["next_before"] is None
    everything = await service.call("memory_list", {"include_retired": True}, A)
    assert [item["id"] for item in everything["items"]] == ids[::-1]
    assert everything["items"][-1]["retired_at"] is not None


@pytest.mark.anyio
async def test_list_and_stats_see_only_what_the_caller_may_read(service: Service) -> None:
    await service.call("memory_write_bulk", {"memories": [
        {"content": "A private plan of agent a.", "type": "plan"},
        {"content": "The team meets on Mondays.", "type": "fact", "scope": "org", "pinned": True}]}, A)
    await service.call("memory_write", {"content": "Agent b keeps its own notes."}, B)
    seen_by_b = await service.call("memory_list", {}, B)
    assert sorted(item["content"] for item in seen_by_b["items"]) == [
        "Agent b keeps its own notes.", "The team meets on Mondays."]
    assert [i["content"] for i in (await service.call("memory_list", {"type": "plan"}, B))["items"]] == []
    stats_a = await service.call("memory_stats", {}, A)
    assert (stats_a["current"], stats_a["pinned"], stats_a["retired"]) == (2, 1, 0)
    assert stats_a["by_type"] == {"fact": 1, "plan": 1}
    assert stats_a["by_scope"] == {"agent": 1, "org": 1}
    assert stats_a["oldest"] <= stats_a["newest"]
    stats_b = await service.call("memory_stats", {}, B)
    assert (stats_b["current"], stats_b["by_type"]) == (2, {"fact": 1, "note": 1})
    assert (await service.call("memory_stats", {"agent_id": "agent-b"}, B))["current"] == 1
    plan = (await service.call("memory_list", {"type": "plan"}, A))["items"][0]["id"]
    await service.call("memory_delete", {"id": plan}, A)
    after = await service.call("memory_stats", {}, A)
    assert (after["current"], after["retired"], after["by_type"]) == (1, 1, {"fact": 1})
    assert after["oldest"] == after["newest"] == stats_a["newest"] and after["by_scope"] == {"org": 1}
    # Agent a's retired plan is not b's to count.
    assert (await service.call("memory_stats", {}, B))["retired"] == 0


@pytest.mark.anyio
async def test_stats_of_an_empty_store_are_zero(service: Service) -> None:
    stats = await service.call("memory_stats", {}, A)
    assert stats == {"current": 0, "retired": 0, "pinned": 0, "archived": 0, "by_type": {}, "by_scope": {},
                     "oldest": None, "newest": None}


def test_bulk_list_and_stats_on_the_command_line(cli: Run, env: dict[str, str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("M3_STORE_URL", env["M3_STORE_URL"])
    monkeypatch.setenv("M3_IDENTITY_AGENT_ID", "agent-a")
    done = cli("memory", "write_bulk", "--memories", json.dumps(notes("one heron", "two herons"))).document()
    assert done["created"] == 2
    listed = cli("memory", "memory_list", "--limit", "1").document()
    assert [item["content"] for item in listed["items"]] == ["two herons"] and listed["next_before"]
    assert cli("memory", "stats").document()["current"] == 2
    assert cli("memory", "write_bulk", "--memories", "[]").error()["code"] == "invalid_argument"
