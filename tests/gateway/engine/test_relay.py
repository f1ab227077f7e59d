"""Bare ``m3`` with the engine: MCP on stdio relayed to the store's engine, driven by the official SDK client."""

from __future__ import annotations

import time
from typing import Any

import mcp_types as types
import pytest
import trio
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from m3.config import load_config
from m3.gateway.engine import client
from m3.gateway.engine.paths import engine_paths

pytestmark = pytest.mark.anyio


def structured(result: types.CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    content: dict[str, Any] | None = result.structured_content
    assert content is not None
    return content


def params(m3_executable: str, child_env: dict[str, str], agent: str) -> StdioServerParameters:
    env = {name: child_env[name] for name in ("M3_HOME", "M3_STORE_URL", "PATH", "PYTHONPATH")}
    return StdioServerParameters(command=m3_executable, args=[], env={**env, "M3_IDENTITY_AGENT_ID": agent})


async def test_two_stdio_front_ends_share_one_engine_and_a_notify_wakes_the_other_s_wait(
        m3_executable: str, child_env: dict[str, str], env: dict[str, str]) -> None:
    with trio.fail_after(90):
        async with Client(params(m3_executable, child_env, "alice"), mode="legacy") as alice, \
                Client(params(m3_executable, child_env, "bob"), mode="legacy") as bob:
            sock = engine_paths(load_config(env)).sock
            status = client.status(sock)
            assert status is not None  # both relay to the one engine of the store
            loaded = structured(await alice.call_tool("tools_load_domain", {"domain": "notifications"}))
            assert "notifications_wait" in loaded["registered"]
            assert "notifications_wait" in {t.name for t in (await alice.list_tools()).tools}
            assert "notifications_wait" not in {t.name for t in (await bob.list_tools()).tools}
            for who in (alice, bob):
                structured(await who.call_tool("m3_call", {"tool": "agent_register", "args": {}}))
            got: dict[str, Any] = {}

            async def wait() -> None:
                got["answer"] = structured(await alice.call_tool("notifications_wait", {"timeout": 30}))
                got["woke"] = time.monotonic()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(wait)
                # The notify goes once the engine holds the wait (a notify sent earlier would be answered
                # at once, as pending, and would not test the wake-up).
                with trio.fail_after(10):
                    while (client.status(sock) or {}).get("inflight", 0) < 1:
                        await trio.sleep(0.005)
                structured(await bob.call_tool("m3_call", {"tool": "notify", "args": {
                    "to_agent": "alice", "message": "your turn"}}))
                acked = time.monotonic()
            assert [n["message"] for n in got["answer"]["items"]] == ["your turn"]
            assert got["woke"] - acked < 1.0  # woken across processes, far inside the 30 s timeout
            written = structured(await bob.call_tool("memory_write", {"content": "bob's note", "scope": "user"}))
            found = structured(await alice.call_tool("memory_get", {"id": written["id"]}))
            assert found["content"] == "bob's note"
            with pytest.raises(MCPError):
                await alice.call_tool("no_such_tool", {})
            bad = await alice.call_tool("memory_write", {"content": ""})
            assert bad.is_error
