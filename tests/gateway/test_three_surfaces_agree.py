"""Every tool answers the same over MCP, the CLI and the HTTP routes: the same results, the same error codes.

One store; three callers acting as the same agent (``local``): the SDK's
MCP client in process, ``m3.gateway.cli.main`` (the CLI's own code, with
its own actor system on the store, in a worker thread because it runs its
own trio loop), and a real HTTP client against ``m3 serve``'s app on a
loopback port with a token for ``local``. Each tool is called with no
arguments, with an unknown argument, and where it needs an id with a
seeded one; the three outcomes are compared after the calls of all three.
"""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Awaitable, Callable
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import httpx2
import pytest
import trio
from mcp import Client

from m3.gateway.cli import main as cli_main
from m3.gateway.mcp_server import build_server, local_identity
from m3.gateway.registry import default_registry
from m3.gateway.service import CallContext, Service
from tests.gateway.test_mcp_http import serving, token_for

REGISTRY = default_registry()
MISSING_ID = "00000000-0000-4000-8000-000000000000"
#: Calls beyond `{}` and an unknown argument; "{memory}", "{task}" and "{chat}" are seeded ids.
CASES: dict[str, list[dict[str, Any]]] = {
    "notifications_wait": [{"timeout": 0}],
    "memory_get": [{"id": "{memory}"}, {"id": MISSING_ID}],
    "memory_history": [{"id": "{memory}"}],
    "memory_graph": [{"id": "{memory}"}],
    "memory_verify": [{"id": "{memory}"}],
    "memory_unconsolidate": [{"id": "{memory}"}, {"id": MISSING_ID}],
    "memory_search": [{"query": "surfaces agree"}],
    "memory_write": [{"content": "A note written over one surface.", "type": "no_such_type"}],
    "task_get": [{"id": "{task}"}, {"id": MISSING_ID}],
    "task_tree": [{"id": "{task}"}],
    "memory_list": [{"limit": 2}],
    "task_list": [{}],
    "agent_get": [{"id": "local"}, {"id": "nobody-here"}],
    "tools_load_domain": [{"domain": "task"}, {"domain": "no_such_domain"}],
    "m3_call": [{"tool": "memory_get", "args": {"id": "{memory}"}}, {"tool": "memory_gte", "args": {}}],
    "chatlog_search": [{"query": "surfaces"}],
    "chatlog_write_bulk": [{"messages": []}],
    "chatlog_list": [{"conversation_id": "c1", "after_turn": 0}, {"limit": 0}],
    "chatlog_redact": [{"id": MISSING_ID, "confirm": True}, {"id": MISSING_ID}],
    # Only tools that read no disk: over HTTP the caller is bound by a token, and files.roots is empty.
    "files_search": [{"query": "surfaces agree"}],
    "files_get": [{"path": "/no/such/indexed/file.md"}, {"path": "relative.md"}],
    "files_list": [{"path": "/no/such/folder", "limit": 5}],
    "files_forget": [{"path": "/no/such/folder"}],
    "files_index": [{"path": "relative/notes"}],
    "entity_search": [{"query": "surfaces"}],
    "entity_get": [{"id": MISSING_ID}],
    "entity_graph": [{"id": MISSING_ID}, {"id": MISSING_ID, "depth": 9}],
    "entity_relations": [{"entity_id": MISSING_ID}],
    "entity_merge": [{"source_id": MISSING_ID, "target_id": MISSING_ID}],
    "entity_unmerge": [{"source_id": MISSING_ID}],
    "entity_extract": [{"limit": 0}],
    "chatlog_get": [{"id": "{chat}"}, {"conversation_id": "s1", "turn": 1}, {"id": MISSING_ID}],
    "chatlog_context": [{"id": "{chat}", "after": 1}, {"id": MISSING_ID}],
    "conversations_get": [{"conversation_id": "s1"}, {"conversation_id": "nowhere"}],
    "conversations_stats": [{"conversation_id": "s1"}],
    "conversations_history": [{"conversation_id": "nowhere"}],
    "conversations_search": [{"query": "surfaces"}],
    "conversations_summarise": [{"conversation_id": "s1", "sentences": 1}],
    "conversations_promote": [{"conversation_id": "nowhere"}],
    "conversations_delete": [{"conversation_id": "nowhere", "confirm": True}, {"conversation_id": "s1"}],
    "conversations_redact": [{"conversation_id": "nowhere", "confirm": True}],
    "m3_help": [{"tool": "memory_search"}, {"tool": "memory_serch"}],
    "diagnostics_slow_calls": [{"limit": 0}],
    "admin_import": [{"path": "/nonexistent/m3-export.jsonl"}, {"path": "relative.jsonl"}],
    "admin_export_inspect": [{"path": "/nonexistent/m3-export.jsonl"}],
    "admin_embedding_backlog": [{"limit": 3}],
}
#: notifications_wait would wait its default 30 s three times over; the rest answer at once.
NO_EMPTY_CALL = {"notifications_wait"}
#: Results that say something about the answering process (or a store the other surfaces write to between the
#: calls), or about the caller's connection (agent_whoami: bound through HTTP's token only): compared by their keys.
PER_PROCESS = {"agent_whoami", "embedder_status", "tools_load_domain", "diagnostics_store_status",
               "diagnostics_actor_stats", "diagnostics_config", "diagnostics_health", "diagnostics_slow_calls",
               "admin_engine_status", "admin_reembed", "admin_embedding_backlog", "admin_verify", "loop_status",
               "sync_status"}
#: The admin domain, steering the loop and running a sync are the local user's: HTTP calls here carry a token (a
#: bound caller), so valid calls there end in ``forbidden`` and only MCP and the CLI (local) are compared.
LOCAL_ONLY = {t.spec.name for t in REGISTRY if t.spec.domain == "admin"} | {"loop_run_once", "loop_pause",
                                                                           "loop_resume", "sync_now"}
#: Fields a read itself changes (access statistics), or that differ because each surface's write is its own.
#: (A search's score includes recency, which moves with the clock between the three calls.)
VOLATILE = {"access_count", "last_accessed_at", "last_seen_at", "score"}

Outcome = tuple[str, Any]  # ("ok", result) or ("error", code)


def calls(seeded: dict[str, str]) -> list[tuple[str, dict[str, Any]]]:
    """Every (tool, arguments) pair of the comparison, ids filled in."""
    out: list[tuple[str, dict[str, Any]]] = []
    for tool in REGISTRY:
        name = tool.spec.name
        cases = ([] if name in NO_EMPTY_CALL else [{}]) + [{"no_such_argument": 1}] + CASES.get(name, [])
        out.extend((name, json.loads(json.dumps(args).replace("{memory}", seeded["memory"])
                                     .replace("{task}", seeded["task"]).replace("{chat}", seeded["chat"])))
                   for args in cases)
    return out


def shape(value: Any) -> Any:
    """The structure of a result: keys and types, not values."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return [shape(v) for v in value[:1]]
    return "·"  # a leaf: its value (and whether it is null yet) is the write's own


def settled(value: Any) -> Any:
    """A result with what legitimately differs between two equal calls blanked out."""
    if isinstance(value, dict):
        return {k: "<volatile>" if k in VOLATILE else settled(v) for k, v in value.items()}
    if isinstance(value, list):
        return [settled(v) for v in value]
    return value


def comparable(name: str, outcome: Outcome) -> Any:
    kind, body = outcome
    if kind == "error":
        return outcome
    if name == "m3_call":
        return comparable(body["tool"], ("ok", body["result"]))
    spec = REGISTRY.get(name).spec
    if name in PER_PROCESS:
        return kind, sorted(body)
    if not spec.read_only:
        return kind, shape(body)  # a write's result names its own new row; its structure must agree
    return kind, settled(body)


async def seed(service: Service) -> dict[str, str]:
    ctx = CallContext(agent_id="local")
    memory = await service.call("memory_write", {"content": "The surfaces agree on every tool."}, ctx)
    task = await service.call("task_create", {"title": "Compare the surfaces"}, ctx)
    for surface in ("the CLI", "HTTP"):  # one open task for each surface's task_claim
        await service.call("task_create", {"title": f"Compare the surfaces over {surface}", "priority": -1}, ctx)
    await service.call("agent_register", {}, ctx)
    chat = await service.call("chatlog_write_bulk", {"messages": [
        {"conversation_id": "s1", "role": "user", "content": "Do the surfaces agree on conversations?"},
        {"conversation_id": "s1", "role": "assistant", "content": "They agree on every conversation tool."}]}, ctx)
    service.system.wait_embedded()  # the chat rows' vectors are stored before any surface counts them
    return {"memory": memory["id"], "task": task["id"], "chat": chat["items"][0]["id"]}


def run_cli(tmp: Path, name: str, args: dict[str, Any]) -> Outcome:
    """``m3 <domain> <tool> --json-file ARGS`` through the CLI's main, stdout and stderr captured."""
    tool = REGISTRY.get(name).spec
    path = tmp / "args.json"
    path.write_text(json.dumps(args), encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        status = cli_main([tool.domain, tool.name, "--json-file", str(path)])
    if status == 0:
        return "ok", json.loads(out.getvalue())
    assert status == 1, (name, err.getvalue())
    return "error", json.loads(err.getvalue())["error"]["code"]


def http_caller(http: httpx2.AsyncClient, base: str) -> Callable[[str, dict[str, Any]], Awaitable[Outcome]]:
    async def call(name: str, args: dict[str, Any]) -> Outcome:
        answer = await http.post(f"{base}/v1/tools/{name}", json=args)
        body = answer.json()
        if answer.status_code == 200:
            return "ok", body
        assert "error" in body and answer.status_code >= 400, (name, answer.status_code, body)
        return "error", body["error"]["code"]
    return call


@pytest.mark.slow
@pytest.mark.anyio
async def test_every_tool_gives_the_same_result_or_error_code_over_mcp_the_cli_and_http(
        service: Service, env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        isolated_logging: None) -> None:
    monkeypatch.setenv("M3_STORE_URL", env["M3_STORE_URL"])  # the CLI reads its environment
    seeded = await seed(service)
    token, _ = token_for(service, "local")
    outcomes: dict[str, list[tuple[str, dict[str, Any], Outcome]]] = {"mcp": [], "cli": [], "http": []}
    async with serving(service) as mcp_url, \
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http, \
            Client(build_server(service, local_identity(service.config)), mode="legacy") as mcp:
        over_http = http_caller(http, mcp_url.removesuffix("/mcp"))
        for name, args in calls(seeded):
            answered = await mcp.call_tool(name, args)
            content = answered.structured_content or {}
            outcomes["mcp"].append((name, args, ("error", content["error"]["code"]) if answered.is_error
                                    else ("ok", content)))
            outcomes["cli"].append((name, args, await trio.to_thread.run_sync(run_cli, tmp_path, name, args)))
            outcomes["http"].append((name, args, await over_http(name, args)))
    assert {n for n, _a, _o in outcomes["http"]} == {t.spec.name for t in REGISTRY}  # every tool was called
    def compared(name: str) -> tuple[str, ...]:
        return ("mcp", "cli") if name in LOCAL_ONLY else tuple(outcomes)

    disagreements = [
        (name, args, {surface: comparable(name, outcomes[surface][i][2]) for surface in outcomes})
        for i, (name, args, _o) in enumerate(outcomes["mcp"])
        if len({json.dumps(comparable(name, outcomes[s][i][2]), sort_keys=True) for s in compared(name)}) > 1
        or (name in LOCAL_ONLY and outcomes["http"][i][2] not in (("error", "forbidden"), outcomes["mcp"][i][2]))
    ]
    assert disagreements == [], json.dumps(disagreements, indent=1, default=str)[:6000]
    errors = sum(1 for _n, _a, (kind, _b) in outcomes["http"] if kind == "error")
    assert 0 < errors < len(outcomes["http"]), "the comparison covers both results and errors"
    print(f"{len(outcomes['http'])} calls agreed, {errors} of them errors", file=sys.stderr)
