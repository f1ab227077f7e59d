"""The MCP surface through the official SDK client, in process, on trio.

``mode="legacy"`` speaks the handshake era (``initialize``) over in-memory
JSON-RPC streams, which is what real hosts do today; one test uses the
default ``"auto"`` mode, which negotiates the modern era. The server is the
real one over a started m3 (SQLite, actors, the offline embedder).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
import trio
from mcp import Client, MCPError
from mcp.client.session import MessageHandlerFnT
from mcp.server import ServerRequestContext

from m3.gateway.mcp_server import build_server, local_identity
from m3.gateway.service import CallContext, Service
from tests.cognition.rollup_driver import run_until_idle

pytestmark = pytest.mark.anyio

STARTUP_TOOLS = {"memory_write", "memory_search", "memory_supersede", "memory_get", "chatlog_search", "m3_call"}

@asynccontextmanager
async def connect(service: Service, mode: str = "legacy",
                  on_message: MessageHandlerFnT | None = None) -> AsyncIterator[Client]:
    server = build_server(service, local_identity(service.config))
    async with Client(server, mode=mode, message_handler=on_message) as client:
        yield client


def ok(result: types.CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    content: dict[str, Any] | None = result.structured_content
    assert content is not None
    return content


def tool_error(result: types.CallToolResult) -> dict[str, Any]:
    """The error body of a tool error; the text block must say the same for hosts that read only text."""
    assert result.is_error
    assert result.structured_content is not None
    assert isinstance(result.content[0], types.TextContent)
    assert json.loads(result.content[0].text) == result.structured_content
    error: dict[str, Any] = result.structured_content["error"]
    assert error["hint"]
    return error


async def m3_call(client: Client, tool: str, /, **args: Any) -> types.CallToolResult:
    return await client.call_tool("m3_call", {"tool": tool, "args": args})


async def test_a_host_sees_the_six_startup_tools_and_is_told_the_list_can_change(service: Service) -> None:
    async with connect(service) as client:
        tools = (await client.list_tools()).tools
        assert {t.name for t in tools} == STARTUP_TOOLS
        assert len(tools) == 6
        assert client.server_capabilities.tools is not None
        assert client.server_capabilities.tools.list_changed is True
        assert client.protocol_version < "2026"  # the handshake era, not the modern one


async def test_m3_call_reaches_an_unlisted_tool_and_its_effect_is_visible(service: Service) -> None:
    async with connect(service) as client:
        written = ok(await client.call_tool("memory_write", {"content": "Deploys happen on Fridays.",
                                                              "type": "fact"}))
        pinned = ok(await m3_call(client, "memory_pin", id=written["id"]))
        assert pinned == {"tool": "memory_pin", "result": {"id": written["id"], "pinned": True}}
        record = ok(await client.call_tool("memory_get", {"id": written["id"][:8]}))
        assert record["id"] == written["id"]
        assert record["pinned"] is True


async def test_m3_call_with_a_misspelt_tool_is_a_tool_error_that_suggests_the_right_name(service: Service) -> None:
    async with connect(service) as client:
        error = tool_error(await m3_call(client, "memory_pni", id="deadbeef"))
    assert error["code"] == "unknown_tool"
    assert "memory_pin" in error["details"]["did_you_mean"]
    assert "memory_pin" in error["hint"]


async def test_loading_a_domain_notifies_the_client_which_then_lists_the_domain(service: Service) -> None:
    changed = trio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    memory_tools = {t.spec.name for t in service.registry.domain("memory")}
    async with connect(service, on_message=on_message) as client:
        loaded = ok(await m3_call(client, "tools_load_domain", domain="memory"))
        assert set(loaded["result"]["registered"]) == memory_tools - STARTUP_TOOLS
        with trio.fail_after(5):
            await changed.wait()
        listed = {t.name for t in (await client.list_tools()).tools}
        assert listed == STARTUP_TOOLS | memory_tools
        again = ok(await client.call_tool("tools_load_domain", {"domain": "memory"}))
        assert again["registered"] == []


async def test_a_domain_loaded_by_one_agent_is_not_listed_for_another_agent(service: Service) -> None:
    def by_client_name(ctx: ServerRequestContext[Any]) -> CallContext:  # as a token binds a caller to an agent
        return CallContext(agent_id=ctx.session.client_params.client_info.name)

    server = build_server(service, by_client_name)
    async with (Client(server, mode="legacy", client_info=types.Implementation(name="a", version="1")) as first,
                Client(server, mode="legacy", client_info=types.Implementation(name="b", version="1")) as second):
        ok(await m3_call(first, "tools_load_domain", domain="memory"))
        assert "memory_pin" in {t.name for t in (await first.list_tools()).tools}
        assert {t.name for t in (await second.list_tools()).tools} == STARTUP_TOOLS


@pytest.mark.parametrize(("tool", "args", "code"), [
    ("memory_write", {"content": "x", "type": "nonsense"}, "unknown_memory_type"),
    ("memory_write", {"content": "   "}, "invalid_argument"),
    ("memory_write", {"content": "x", "colour": "red"}, "invalid_argument"),
    ("memory_write", {"content": "x" * 100_001}, "content_too_large"),
    ("memory_search", {"query": "x", "k": -1}, "invalid_argument"),
    ("memory_search", {"query": "x", "as_of": "last tuesday"}, "invalid_time"),
    ("memory_get", {"id": "deadbeef00"}, "not_found"),
    ("m3_call", {"tool": "tools_load_domain", "args": {"domain": "memroy"}}, "unknown_domain"),
])
async def test_a_bad_argument_is_a_tool_error_with_a_code_not_a_protocol_error(
        service: Service, tool: str, args: dict[str, Any], code: str) -> None:
    async with connect(service) as client:
        error = tool_error(await client.call_tool(tool, args))
        assert error["code"] == code
        assert ok(await m3_call(client, "memory_verify"))["result"]["checked"] == 0


async def test_calling_a_tool_that_does_not_exist_is_a_protocol_error(service: Service) -> None:
    async with connect(service) as client:
        with pytest.raises(MCPError) as raised:
            await client.call_tool("memory_teleport", {})
    assert raised.value.code == types.INVALID_PARAMS
    assert "memory_teleport" in raised.value.message


async def test_every_tool_answers_through_m3_call_with_a_result_its_output_schema_accepts(service: Service) -> None:
    async with connect(service) as client:
        for domain in service.registry.domains():
            ok(await client.call_tool("tools_load_domain", {"domain": domain}))
        await client.list_tools()  # the client now holds every tool's outputSchema
        exercised = await _exercise_every_tool(client, service)
    # m3_call itself is exercised (and validated by the client) by every call above.
    assert set(exercised) | {"m3_call"} == {t.spec.name for t in service.registry}


async def _exercise_conversations(run: Any, chat_id: str) -> None:
    """The chat log's single-row reads and the conversations domain, on conv-1 (three turns, one redacted)."""
    assert (await run("chatlog_get", id=chat_id))["message"]["content"] == "Friday it is."
    await run("chatlog_context", id=chat_id, before=1, after=1)
    assert (await run("chatlog_stats"))["redacted"] == 1
    await run("conversations_list", limit=5)
    await run("conversations_get", conversation_id="conv-1")
    await run("conversations_search", query="deploy Friday")
    assert (await run("conversations_promote", conversation_id="conv-1", turns=[0]))["created"] == 1
    await run("conversations_summarise", conversation_id="conv-1", sentences=2, store=True)
    await run("conversations_stats", conversation_id="conv-1")
    await run("chatlog_write", conversation_id="conv-2", role="user", content="A conversation to let go of.")
    await run("conversations_redact", conversation_id="conv-2", confirm=True)
    await run("conversations_delete", conversation_id="conv-2", confirm=True)
    assert [e["event"] for e in (await run("conversations_history", conversation_id="conv-2"))["events"]] == [
        "redacted", "deleted"]


async def _exercise_every_tool(client: Client, service: Service) -> list[str]:
    """Call each tool once through m3_call; the client's own validator checks each inner result."""
    done: list[str] = []

    async def run(tool: str, /, **args: Any) -> dict[str, Any]:  # (m3_help's own argument is named tool)
        inner: dict[str, Any] = ok(await m3_call(client, tool, **args))["result"]
        await client.session.validate_tool_result(tool, types.CallToolResult(content=[], structured_content=inner))
        done.append(tool)
        return inner

    a = await run("memory_write", content="The deploy runs on Fridays.", type="fact", title="deploy day",
                  metadata={"team": "ops"}, importance=0.8)
    # Shared with every agent: the handoff and the task result below name its successor.
    b = await run("memory_write", content="Use PostgreSQL for the website.", type="decision", scope="org")
    await run("memory_search", query="When does the deploy run?", explain=True)
    await run("memory_get", id=a["id"][:8])
    c = await run("memory_supersede", id=b["id"], content="Use SQLite for the website.", reason="simpler")
    await run("memory_update", id=a["id"], title="deploy weekday")
    await run("memory_pin", id=a["id"])
    await run("memory_unpin", id=a["id"])
    await run("memory_history", id=b["id"])
    await run("memory_link", from_id=a["id"], to_id=c["id"], type="related")
    await run("memory_graph", id=a["id"], depth=2)
    assert (await run("memory_unlink", from_id=a["id"], to_id=c["id"], type="related"))["removed"] == ["related"]
    bulk_notes = await run("memory_write_bulk", memories=[{"content": "Bulk note one."}, {"content": "Bulk note two."}])
    assert bulk_notes["created"] == 2
    assert (await run("memory_list", limit=2))["count"] == 2
    assert (await run("memory_stats"))["current"] >= 4
    await run("memory_verify")
    await run("memory_delete", id=a["id"], reason="no longer needed")
    assert (await run("memory_restore", id=a["id"], reason="needed after all"))["retired_id"] is None
    await run("chatlog_write", conversation_id="conv-1", role="user", content="Please deploy on Friday.")
    await run("chatlog_search", query="deploy Friday")
    bulk = await run("chatlog_write_bulk", messages=[
        {"conversation_id": "conv-1", "role": "assistant", "content": "Friday it is."},
        {"conversation_id": "conv-1", "role": "user", "content": "My token is abc123.", "model": None}])
    assert [item["turn"] for item in bulk["items"]] == [1, 2]
    await run("chatlog_redact", id=bulk["items"][1]["id"], reason="a secret", confirm=True)
    listed = await run("chatlog_list", conversation_id="conv-1", after_turn=0)
    assert [item["content"] for item in listed["items"]] == ["Friday it is.", "[redacted]"]
    assert (await run("chatlog_list"))["conversations"][0]["messages"] == 3
    await _exercise_conversations(run, bulk["items"][0]["id"])
    await run("m3_index", domain="memory")
    await run("tools_list_domains")
    await run("tools_load_domain", domain="chatlog")
    await run("embedder_status")
    await _exercise_coordination(run, a["id"], c["id"])
    await _exercise_conflicts(run, service)
    await _exercise_rollup(run, service)
    await _exercise_loop(run)
    await _exercise_sync(client, run, done)
    await _exercise_entities(run)
    await _exercise_governance(run)
    assert (await run("diagnostics_store_status"))["counts"]["chat_messages"] == 3  # chatlog_write, then 2 in bulk
    assert (await run("diagnostics_actor_stats"))["actors"][-1]["actor"] == "routers"
    assert any(row["key"] == "store.url" for row in (await run("diagnostics_config"))["settings"])
    await _exercise_files(run)
    await _exercise_admin(run)
    return done


async def _exercise_files(run: Any) -> None:
    """Index a small folder, read it back every way, change it, forget it."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp).resolve()
        (folder / "deploy.md").write_text("# Deploy\nThe deploy runs on Fridays.\n")
        assert (await run("files_status", path=str(folder)))["new"] == 1
        assert (await run("files_index", path=str(folder)))["chunks_written"] == 1
        assert (await run("files_search", query="deploy Fridays", path=str(folder)))["count"] == 1
        assert (await run("files_get", path=str(folder / "deploy.md")))["count"] == 1
        assert (await run("files_list", path=str(folder)))["count"] == 1
        assert (await run("files_stats", path=str(folder)))["files"] == 1
        assert (await run("files_reindex", path=str(folder)))["changed"] == 1
        await run("memory_write_from_file", path=str(folder / "deploy.md"), start_line=2)
        assert (await run("files_forget", path=str(folder)))["files"] == 1


async def _exercise_entities(run: Any) -> None:
    """Each entity tool once: two memories naming the same person twice over, indexed now, merged, unmerged."""
    await run("memory_write", content="Alice Smith works at Acme Corp.", type="fact", scope="org")
    await run("memory_write", content="We asked Ali about Acme Corp.", type="fact", scope="org")
    await run("entity_extract")
    alice = (await run("entity_search", query="alice smith"))["items"][0]
    ali = (await run("entity_list", type="name"))["items"]
    [short] = [item for item in ali if item["name"] == "Ali"]
    await run("entity_get", id=alice["id"])
    await run("entity_graph", id=alice["id"], depth=2)
    await run("entity_relations", predicate="works_at")
    await run("entity_merge", source_id=short["id"], target_id=alice["id"])
    await run("entity_unmerge", source_id=short["id"])


async def _exercise_admin(run: Any) -> None:
    """The admin and help tools, the local user calling: export, then merge the file back (adding nothing)."""
    assert (await run("m3_help", tool="memory_write"))["example"]["tool"] == "memory_write"
    assert (await run("diagnostics_health"))["checks"]
    assert (await run("diagnostics_slow_calls", limit=3))["calls"]
    with tempfile.TemporaryDirectory() as folder:
        path = str(Path(folder) / "store.jsonl")
        exported = await run("admin_export", path=path)
        assert (await run("admin_export_inspect", path=path))["importable"] is True
        assert (await run("admin_import", path=path, merge=True))["rows"] == 0 < exported["rows"]
    await run("admin_verify")
    await run("admin_optimise")
    await run("admin_embedding_backlog", limit=2)
    await run("admin_reembed")
    assert (await run("admin_engine_status"))["mode"] == "embedded"


async def _exercise_conflicts(run: Any, service: Service) -> None:
    """Two facts that differ in a number become a conflict once their vectors are stored; settle it."""
    await run("memory_write", content="Customer 4411 ordered 3 laptops.", type="fact")
    await run("memory_write", content="Customer 4412 ordered 3 laptops.", type="fact")
    await trio.to_thread.run_sync(service.system.wait_embedded)
    listed = await run("conflicts_list", kind="near_duplicate")
    await run("conflicts_resolve", id=listed["items"][0]["id"], resolution="keep_both")


async def _exercise_governance(run: Any) -> None:
    await run("audit_query", reader="local", limit=5)
    await run("gdpr_export", agent_id="helper")
    await run("gdpr_forget", agent_id="nobody-here", confirm=True)


async def _exercise_loop(run: Any) -> None:
    """The loop domain: pause one pass, see it paused, resume it, run it once, see the run counted."""
    await run("loop_pause", **{"pass": "decay"})
    paused = {p["name"]: p["paused"] for p in (await run("loop_status"))["passes"]}
    assert paused["decay"] is True and paused["reflect"] is False
    await run("loop_resume", **{"pass": "decay"})
    ran = await run("loop_run_once", **{"pass": "decay"})
    assert [r["name"] for r in ran["runs"]] == ["decay"]
    decay = next(p for p in (await run("loop_status"))["passes"] if p["name"] == "decay")
    assert decay["paused"] is False and decay["runs"] == 1


async def _exercise_sync(client: Client, run: Any, done: list[str]) -> None:
    """The sync domain on a store with no warehouse: status and log answer; sync_now is refused with a code
    (tests/actors/test_sync.py syncs real stores with a warehouse)."""
    assert (await run("sync_status"))["configured"] is False
    assert (await run("sync_log", limit=5))["runs"] == []
    error = tool_error(await m3_call(client, "sync_now"))
    assert error["code"] in ("sync_not_configured", "sync_unsupported")
    done.append("sync_now")


async def _exercise_rollup(run: Any, service: Service) -> None:
    """Three related notes become a belief (one roll-up pass, driven here as the loop will), then it is undone."""
    for text in ("Production deploys happen on Friday afternoons, after the staging checks pass.",
                 "We deploy to production every Friday once the staging checks are green.",
                 "Friday is deploy day: production gets the release after staging checks pass."):
        await run("memory_write", content=text, type="note")
    await trio.to_thread.run_sync(run_until_idle, service.system)
    [belief] = (await run("memory_list", type="belief"))["items"]
    assert len((await run("memory_unconsolidate", id=belief["id"], reason="exercised"))["sources"]) == 3


async def _exercise_coordination(run: Any, memory_id: str, shared_id: str) -> None:
    """Each coordination tool once, as the local agent working with a second agent."""
    await run("agent_register", role="tester")
    await run("agent_heartbeat")
    await run("agent_register", agent_id="helper")
    await run("memory_share", id=memory_id, agents=["helper"])
    await run("memory_unshare", id=memory_id, agents=["helper"])
    await run("agent_list", status="active")
    await run("agent_get", id="helper")
    sent = await run("memory_handoff", to_agent="local", task="Check the deploy day.", context_ids=[shared_id])
    await run("memory_inbox")
    await run("memory_inbox_ack", ids=[sent["id"]])
    await run("notify", to_agent="local", message="ping")
    waited = await run("notifications_wait", timeout=5)
    await run("notifications_ack", ids=[waited["items"][0]["id"]])
    await run("notifications_poll")
    await run("notifications_ack_all")
    root = await run("task_create", title="Release 1.0")
    child = await run("task_create", title="Write notes", parent_id=root["id"], kind="docs")
    child = await run("task_assign", id=child["id"], version=child["version"], assignee="helper")
    child = await run("task_assign", id=child["id"], version=child["version"], assignee=None)
    claimed = (await run("task_claim", filter={"kind": "docs"}, lease=60))["task"]
    await run("task_release", id=claimed["id"], reason="exercised")
    claimed = (await run("task_claim", filter={"kind": "docs"}, lease=60))["task"]
    claimed = await run("task_heartbeat", id=claimed["id"], lease=60)
    claimed = await run("task_set_result", id=claimed["id"], version=claimed["version"], memory_id=shared_id)
    await run("task_update", id=claimed["id"], version=claimed["version"], state="completed")
    await run("task_get", id=root["id"], history=True)
    await run("task_list", state="completed")
    await run("task_tree", id=root["id"], depth=2)
    root = await run("task_update", id=root["id"], version=root["version"], state="cancelled")
    await run("task_delete", id=root["id"], version=root["version"])
    assert (await run("agent_whoami"))["agent_id"] == "local"
    await run("agent_offline", agent_id="helper")


async def test_a_modern_client_lists_the_same_tools_and_hears_of_changes_on_a_listen_stream(
        service: Service) -> None:
    async with connect(service, mode="auto") as client:
        assert client.protocol_version >= "2026"
        assert {t.name for t in (await client.list_tools()).tools} == STARTUP_TOOLS
        assert client.server_capabilities.tools is not None
        assert client.server_capabilities.tools.list_changed is True
        async with client.listen(tools_list_changed=True) as subscription:
            ok(await m3_call(client, "tools_load_domain", domain="embedder"))
            with trio.fail_after(5):
                await subscription.__anext__()
        assert "embedder_status" in {t.name for t in (await client.list_tools()).tools}
