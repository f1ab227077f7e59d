"""Remote MCP: Streamable HTTP on hypercorn's trio worker behind per-agent bearer tokens.

The server is m3's own (``serve``), on an ephemeral port, over a started m3;
clients are raw HTTP (to see status codes) and the official SDK client with
an ``Authorization`` header. One test runs ``m3 serve`` and ``m3 token``
as processes, the way an operator would.
"""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import mcp_types as types
import pytest
import trio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from sqlalchemy import create_engine, select

from m3.gateway.http_server import serve
from m3.gateway.service import Service
from m3.gateway.tokens import new_token
from m3.protocols.messages.coordination import CreateToken, RevokeTokens
from m3.store.agents import hash_token
from m3.store.schema import agent_tokens

STARTUP_TOOLS = {"memory_write", "memory_search", "memory_supersede", "memory_get", "chatlog_search", "m3_call"}
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def token_for(service: Service, agent: str) -> tuple[str, str]:
    """A fresh token for ``agent`` (registered on the way) and the token's id."""
    token = new_token()
    row = service.system.writer.ask(CreateToken(agent_id=agent, token_hash=hash_token(token)), 30)
    return token, str(row["id"])


@asynccontextmanager
async def serving(service: Service) -> AsyncIterator[str]:
    stop = trio.Event()
    url: list[str] = []
    ready = trio.Event()

    def on_ready(address: str) -> None:
        url.append(address)
        ready.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: serve(service, "127.0.0.1", 0, ready=on_ready, shutdown=stop))
        with trio.fail_after(30):
            await ready.wait()
        try:
            yield url[0]
        finally:
            stop.set()


@asynccontextmanager
async def client_for(url: str, token: str) -> AsyncIterator[Client]:
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"},
                                  timeout=httpx2.Timeout(30, read=60)) as http, \
            Client(streamable_http_client(url, http_client=http), mode="legacy") as client:
        yield client


def result_of(result: types.CallToolResult) -> dict[str, Any]:
    assert result.structured_content is not None
    content: dict[str, Any] = result.structured_content
    return content


@pytest.mark.anyio
async def test_no_token_or_a_wrong_or_revoked_token_is_http_401_and_a_valid_one_is_served(service: Service) -> None:
    token, token_id = token_for(service, "agent-a")
    async with serving(service) as url, httpx2.AsyncClient(timeout=30) as http:
        missing = await http.post(url, json=INIT, headers=HEADERS)
        assert missing.status_code == 401
        assert "Bearer" in missing.headers["www-authenticate"]
        wrong = await http.post(url, json=INIT, headers={**HEADERS, "Authorization": "Bearer m3_not-a-token"})
        assert wrong.status_code == 401
        good = await http.post(url, json=INIT, headers={**HEADERS, "Authorization": f"Bearer {token}"})
        assert good.status_code == 200
        assert good.json()["result"]["serverInfo"]["name"] == "m3"
        service.system.writer.ask(RevokeTokens(token_id=token_id), 30)
        revoked = await http.post(url, json=INIT, headers={**HEADERS, "Authorization": f"Bearer {token}"})
        assert revoked.status_code == 401


@pytest.mark.anyio
async def test_a_valid_token_lists_the_tools_and_acts_as_its_agent_and_never_as_another(service: Service) -> None:
    token_a, _ = token_for(service, "agent-a")
    token_b, _ = token_for(service, "agent-b")
    async with serving(service) as url:
        async with client_for(url, token_a) as client:
            assert {t.name for t in (await client.list_tools()).tools} == STARTUP_TOOLS
            written = result_of(await client.call_tool("memory_write", {"content": "Token-bound note."}))
            record = result_of(await client.call_tool("memory_get", {"id": written["id"]}))
            assert record["agent_id"] == "agent-a"
            for tool, args in (("memory_write", {"content": "forged", "agent_id": "agent-b"}),
                               ("memory_inbox", {"agent_id": "agent-b"}),
                               ("notifications_poll", {"agent_id": "agent-b"}),
                               ("memory_search", {"query": "note", "agent_id": "agent-b"}),
                               ("task_claim", {"agent_id": "agent-b"})):
                refused = await client.call_tool("m3_call", {"tool": tool, "args": args})
                assert refused.is_error, tool
                assert result_of(refused)["error"]["code"] == "forbidden", tool
            sent = result_of(await client.call_tool("m3_call", {"tool": "memory_handoff", "args": {
                "to_agent": "agent-b", "task": "Review the note.", "context_ids": []}}))["result"]
            assert sent["from_agent"] == "agent-a"
        async with client_for(url, token_b) as client:
            inbox = result_of(await client.call_tool("m3_call", {"tool": "memory_inbox", "args": {}}))["result"]
            assert [(i["id"], i["from_agent"]) for i in inbox["items"]] == [(sent["id"], "agent-a")]


async def m3_call(client: Client, tool: str, **args: Any) -> dict[str, Any]:
    """The inner result, or the error document of a refused call."""
    answer = result_of(await client.call_tool("m3_call", {"tool": tool, "args": args}))
    return dict(answer["error"]) if "error" in answer else dict(answer["result"])


@pytest.mark.anyio
async def test_a_token_reads_its_own_and_shared_memories_only_and_cannot_change_a_task_another_holds(
        service: Service) -> None:
    token_a, _ = token_for(service, "agent-a")
    token_b, _ = token_for(service, "agent-b")
    async with serving(service) as url, client_for(url, token_a) as a, client_for(url, token_b) as b:
        private = await m3_call(a, "memory_write", content="Agent A keeps the staging key here.")
        assert (await m3_call(b, "memory_get", id=private["id"]))["code"] == "not_found"
        assert (await m3_call(b, "memory_share", id=private["id"], agents=["agent-b"]))["code"] == "not_found"
        await m3_call(a, "memory_share", id=private["id"], agents=["agent-b"])
        assert (await m3_call(b, "memory_get", id=private["id"]))["id"] == private["id"]
        assert (await m3_call(b, "memory_unshare", id=private["id"], agents=["agent-b"]))["code"] == "forbidden"

        task = await m3_call(a, "task_create", title="Rotate the staging key")
        held = (await m3_call(b, "task_claim", lease=600))["task"]
        refused = await m3_call(a, "task_update", id=task["id"], version=held["version"], state="cancelled")
        assert (refused["code"], refused["details"]["owner"]) == ("lease_held", "agent-b")
        done = await m3_call(b, "task_update", id=task["id"], version=held["version"], state="completed")
        assert done["state"] == "completed"


@pytest.mark.anyio
async def test_a_session_opened_with_one_token_cannot_be_used_with_another(service: Service) -> None:
    token_a, _ = token_for(service, "agent-a")
    token_b, _ = token_for(service, "agent-b")
    async with serving(service) as url, httpx2.AsyncClient(timeout=30) as http:
        opened = await http.post(url, json=INIT, headers={**HEADERS, "Authorization": f"Bearer {token_a}"})
        session = {"mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        as_b = {**HEADERS, **session, "Authorization": f"Bearer {token_b}"}
        stolen = await http.post(url, json=listing, headers=as_b)
        assert stolen.status_code == 404


def test_m3_serve_and_m3_token_work_as_commands(m3_executable: str, child_env: dict[str, str]) -> None:
    created = subprocess.run([m3_executable, "token", "create", "--agent", "remote-1", "--label", "ci"],
                             env=child_env, capture_output=True, text=True, timeout=120, check=False)
    assert created.returncode == 0, created.stderr
    issued = json.loads(created.stdout)
    assert set(issued) == {"token", "agent_id", "id"} and issued["agent_id"] == "remote-1"
    listed = json.loads(subprocess.run([m3_executable, "token", "list"], env=child_env, capture_output=True,
                                       text=True, timeout=120, check=True).stdout)
    assert [(t["id"], t["agent_id"], t["label"], t["revoked_at"]) for t in listed["tokens"]] == [
        (issued["id"], "remote-1", "ci", None)]
    assert issued["token"] not in json.dumps(listed)
    engine = create_engine(child_env["M3_STORE_URL"])
    try:
        with engine.connect() as conn:
            stored = [tuple(r) for r in conn.execute(select(agent_tokens.c.agent_id, agent_tokens.c.token_hash))]
    finally:
        engine.dispose()
    assert stored == [("remote-1", hash_token(issued["token"]))]  # the hash only, never the token

    server = subprocess.Popen([m3_executable, "serve", "--port", "0"], env=child_env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        announced = json.loads(server.stdout.readline())
        url = announced["url"]

        async def use() -> list[str]:
            async with client_for(url, issued["token"]) as client:
                return [t.name for t in (await client.list_tools()).tools]

        assert set(trio.run(use)) == STARTUP_TOOLS
        searched = httpx2.post(f"{announced['tools_url']}/memory_search", json={"query": "anything"},
                               headers={"Authorization": f"Bearer {issued['token']}"}, timeout=60)
        assert (searched.status_code, searched.json()["count"]) == (200, 0)
    finally:
        server.send_signal(signal.SIGTERM)
        _out, err = server.communicate(timeout=60)
    assert server.returncode == 0, err
