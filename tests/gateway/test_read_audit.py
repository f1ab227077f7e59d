"""The read audit through the service, on each store: every read tool records reader, subject, id, tool and
time; audit_query filters and pages them, and a token-bound agent sees only records about itself; pruning
drops what is past retention."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from m3.actors.system import ActorSystem
from m3.config import Config, load_config
from m3.errors import M3Error
from m3.gateway.registry import default_registry
from m3.gateway.service import CallContext, Service
from m3.protocols.messages.governance import PruneAudit
from m3.protocols.messages.memory import Flush
from tests.gateway.outcomes import Run

pytestmark = pytest.mark.anyio

A, B = CallContext(agent_id="agent-a"), CallContext(agent_id="agent-b")
LOCAL = CallContext(agent_id=None)


async def committed(service: Service) -> None:
    """Every audit record told so far is committed: the keeper hands them over, then the Writer commits."""
    service.system.audit_keeper.ask(Flush(), 30)
    service.system.writer.ask(Flush(), 30)


async def records(service: Service, ctx: CallContext = LOCAL, **filters: Any) -> list[dict[str, Any]]:
    await committed(service)
    return list((await service.call("audit_query", filters, ctx))["items"])


async def test_each_read_tool_records_reader_subject_id_tool_and_time(service: Service) -> None:
    for ctx in (A, B):
        await service.call("agent_register", {}, ctx)
    before = datetime.now(UTC)
    fact = await service.call("memory_write", {"content": "The release train leaves on Thursday.", "scope": "user",
                                               "user_id": "carol"}, A)
    other = await service.call("memory_write", {"content": "Thursday trains need a release manager.",
                                                "scope": "user"}, A)
    await service.call("memory_link", {"from_id": fact["id"], "to_id": other["id"]}, A)
    chat = await service.call("chatlog_write", {"conversation_id": "c1", "role": "user", "scope": "user",
                                                "content": "When does the release train leave?"}, A)
    found = await service.call("memory_search", {"query": "release train Thursday", "k": 2}, B)
    await service.call("memory_get", {"id": fact["id"]}, B)
    await service.call("memory_history", {"id": fact["id"]}, B)
    await service.call("memory_graph", {"id": fact["id"]}, B)
    await service.call("chatlog_search", {"query": "release train"}, B)
    await service.call("memory_handoff", {"to_agent": "agent-b", "task": "Ship it.", "context_ids": [fact["id"]]}, A)
    await service.call("memory_inbox", {}, B)

    got = await records(service, reader="agent-b")
    by_tool: dict[str, set[str]] = {}
    for rec in got:
        by_tool.setdefault(rec["tool"], set()).add(rec["ref_id"])
        assert rec["subject_agent"] == "agent-a"
        assert before <= datetime.fromisoformat(rec["at"]) <= datetime.now(UTC)
    assert by_tool["memory_search"] == {item["id"] for item in found["items"]} == {fact["id"], other["id"]}
    for tool in ("memory_get", "memory_history", "memory_inbox"):
        assert by_tool[tool] == {fact["id"]}
    assert by_tool["memory_graph"] == {fact["id"], other["id"]}
    assert by_tool["chatlog_search"] == {chat["id"]}
    assert {rec["kind"] for rec in got if rec["tool"] == "chatlog_search"} == {"chat"}
    about_carol = await records(service, subject_user="carol")
    assert {rec["ref_id"] for rec in about_carol} == {fact["id"]}
    assert await records(service, reader="agent-b", since=datetime.now(UTC).isoformat()) == []
    # Reads through m3_call are reads too.
    await service.call("m3_call", {"tool": "memory_get", "args": {"id": other["id"]}}, A)
    assert [rec["tool"] for rec in await records(service, reader="agent-a")] == ["memory_get"]


async def test_audit_query_pages_oldest_first(service: Service) -> None:
    fact = await service.call("memory_write", {"content": "Paging is oldest first."}, A)
    for _ in range(5):
        await service.call("memory_get", {"id": fact["id"]}, A)
    await committed(service)
    seen: list[int] = []
    after = 0
    while True:
        page = await service.call("audit_query", {"limit": 2, "after": after}, LOCAL)
        seen += [rec["seq"] for rec in page["items"]]
        if page["next_after"] is None:
            break
        after = page["next_after"]
    assert len(seen) == 5 and seen == sorted(seen)


async def test_a_token_bound_agent_sees_only_records_about_its_own_data_and_reads(service: Service) -> None:
    mine = await service.call("memory_write", {"content": "Agent a keeps this note.", "scope": "user"}, A)
    theirs = await service.call("memory_write", {"content": "Agent b keeps that note.", "scope": "user"}, B)
    await service.call("memory_get", {"id": mine["id"]}, B)
    await service.call("memory_get", {"id": theirs["id"]}, B)
    await committed(service)
    bound_a = CallContext(agent_id="agent-a", bound=True)
    seen = (await service.call("audit_query", {}, bound_a))["items"]
    assert [(rec["ref_id"], rec["reader"]) for rec in seen] == [(mine["id"], "agent-b")]
    # Asking about another agent's data through a token finds nothing of it.
    assert (await service.call("audit_query", {"subject_agent": "agent-b"}, bound_a))["items"] == []
    assert len((await service.call("audit_query", {}, LOCAL))["items"]) == 2


async def test_audit_off_records_nothing(config: Config, system: ActorSystem, env: dict[str, str]) -> None:
    quiet = Service(load_config({**env, "M3_AUDIT_ENABLED": "false"}), system, default_registry())
    fact = await quiet.call("memory_write", {"content": "Nobody audits this read."}, A)
    await quiet.call("memory_get", {"id": fact["id"]}, A)
    assert await records(quiet) == []


async def test_pruning_drops_records_past_retention_and_a_long_running_system_prunes_at_start(
        service: Service, config: Config, env: dict[str, str]) -> None:
    fact = await service.call("memory_write", {"content": "Retention is ninety days."}, A)
    await service.call("memory_get", {"id": fact["id"]}, A)
    await committed(service)
    assert service.system.writer.ask(PruneAudit(before=datetime.now(UTC) - timedelta(days=90)), 30) == 0
    assert len(await records(service)) == 1
    # A second, long-running process with retention 0 prunes at its start: everything before now goes.
    keeper = ActorSystem(load_config({**env, "M3_AUDIT_RETENTION_DAYS": "0"}), service.system.embedder_backend)
    keeper.start()
    try:
        keeper.audit_keeper.ask(Flush(), 30)  # its start told the Writer to prune
        keeper.writer.ask(Flush(), 30)
    finally:
        keeper.stop()
    assert await records(service) == []


async def test_audit_query_refuses_bad_arguments(service: Service) -> None:
    with pytest.raises(M3Error) as raised:
        await service.call("audit_query", {"limit": 0}, LOCAL)
    assert raised.value.code == "invalid_argument"


async def test_over_http_each_token_sees_who_read_its_data_and_may_not_erase(service: Service) -> None:
    import httpx2

    from tests.gateway.test_http_routes import base_of, bearer
    from tests.gateway.test_mcp_http import serving, token_for

    token_a, _ = token_for(service, "agent-a")
    token_b, _ = token_for(service, "agent-b")
    async with serving(service) as url, httpx2.AsyncClient(base_url=base_of(url), timeout=30) as http:
        async def call(tool: str, args: dict[str, Any], token: str) -> httpx2.Response:
            return await http.post(f"/v1/tools/{tool}", json=args, headers=bearer(token))

        written = (await call("memory_write", {"content": "Agent a shares this over HTTP.", "scope": "user"},
                              token_a)).json()
        await call("memory_get", {"id": written["id"]}, token_b)
        seen_by_a = (await call("audit_query", {}, token_a)).json()["items"]
        assert [(r["reader"], r["ref_id"], r["tool"]) for r in seen_by_a] == [("agent-b", written["id"], "memory_get")]
        assert [r["subject_agent"] for r in (await call("audit_query", {}, token_b)).json()["items"]] == ["agent-a"]
        mine = (await call("gdpr_export", {"agent_id": "agent-a"}, token_a)).json()
        assert [m["id"] for m in mine["memories"]] == [written["id"]]
        assert mine["tokens"] and all("token_hash" not in t for t in mine["tokens"])
        for tool, args in (("gdpr_export", {"agent_id": "agent-b"}),
                           ("gdpr_forget", {"agent_id": "agent-a", "confirm": True})):
            answer = await call(tool, args, token_a)
            assert answer.status_code == 403 and answer.json()["error"]["code"] == "forbidden", tool


def test_a_one_shot_cli_command_commits_its_reads_before_it_exits(m3: Run) -> None:
    written = m3("memory", "write", "--content", "Read from the command line.", "--scope", "user").document()
    m3("memory", "get", "--id", written["id"]).document()
    m3("memory", "search", "--query", "command line").document()
    found = m3("governance", "audit_query").document()["items"]
    assert [(r["tool"], r["ref_id"]) for r in found] == [("memory_get", written["id"]),
                                                         ("memory_search", written["id"])]
    assert {(r["reader"], r["subject_agent"]) for r in found} == {("local", "local")}  # identity.agent_id
