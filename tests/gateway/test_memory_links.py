"""memory_unlink through the service, on each store: it removes what memory_link recorded, keeps both
memories, records the removal in history, and only the first memory's owner may do it."""

from __future__ import annotations

from typing import Any

import pytest

from m3.errors import M3Error
from m3.gateway.service import CallContext, Service

A, B = CallContext(agent_id="agent-a"), CallContext(agent_id="agent-b")


async def write(service: Service, content: str, ctx: CallContext = A, **extra: Any) -> str:
    return str((await service.call("memory_write", {"content": content, **extra}, ctx))["id"])


async def edges(service: Service, memory_id: str, ctx: CallContext = A) -> list[tuple[str, str, str]]:
    graph = await service.call("memory_graph", {"id": memory_id}, ctx)
    return sorted((e["from_id"], e["to_id"], e["type"]) for e in graph["edges"])


@pytest.mark.anyio
async def test_unlink_removes_one_kind_or_every_kind_and_keeps_both_memories(service: Service) -> None:
    plan = await write(service, "The migration runs on Saturday.")
    risk = await write(service, "The database is read-only during migrations.")
    for kind in ("related", "references"):
        await service.call("memory_link", {"from_id": plan, "to_id": risk, "type": kind}, A)
    one = await service.call("memory_unlink", {"from_id": plan, "to_id": risk, "type": "references"}, A)
    assert one["removed"] == ["references"]
    assert await edges(service, plan) == [(plan, risk, "related")]
    rest = await service.call("memory_unlink", {"from_id": plan, "to_id": risk}, A)
    assert rest["removed"] == ["related"] and await edges(service, plan) == []
    assert (await service.call("memory_unlink", {"from_id": plan, "to_id": risk}, A))["removed"] == []
    assert (await service.call("memory_get", {"id": risk}, A))["retired_at"] is None
    events = [(e["event"], e["details"].get("type")) for e in
              (await service.call("memory_history", {"id": plan}, A))["events"]]
    assert events[-2:] == [("unlinked", "references"), ("unlinked", "related")]


@pytest.mark.anyio
async def test_only_the_owner_of_the_first_memory_may_unlink(service: Service) -> None:
    mine = await write(service, "Agent a's private plan.")
    shared = await write(service, "The team rota is on the wiki.", scope="org")
    await service.call("memory_link", {"from_id": mine, "to_id": shared}, A)
    with pytest.raises(M3Error) as raised:
        await service.call("memory_unlink", {"from_id": mine, "to_id": shared}, B)
    assert raised.value.code in {"not_found", "forbidden"}
    assert await edges(service, mine) == [(mine, shared, "related")]


@pytest.mark.anyio
async def test_unlink_with_an_unknown_id_or_kind_is_a_coded_error(service: Service) -> None:
    plan = await write(service, "The release is on Monday.")
    with pytest.raises(M3Error) as raised:
        await service.call("memory_unlink", {"from_id": plan, "to_id": "00000000-0000-4000-8000-000000000000"}, A)
    assert raised.value.code == "not_found"
    with pytest.raises(M3Error) as raised:
        await service.call("memory_unlink", {"from_id": plan, "to_id": plan, "type": "no_such_kind"}, A)
    assert raised.value.code == "invalid_argument" and "relationship type" in raised.value.message
