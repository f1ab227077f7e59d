"""``m3`` as a stdio MCP server in a child process, driven by the official SDK client.

One spawn covers the whole conversation: each start costs a few seconds
(imports, actors, the model on first search). The child inherits almost
nothing from the SDK, so its environment is passed explicitly.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
import pytest
import trio
from mcp import Client, StdioServerParameters

pytestmark = pytest.mark.anyio

STARTUP_TOOLS = {"memory_write", "memory_search", "memory_supersede", "memory_get", "chatlog_search", "m3_call"}


def structured(result: types.CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    content: dict[str, Any] | None = result.structured_content
    assert content is not None
    return content


async def test_bare_m3_serves_mcp_on_stdio_for_writing_searching_and_m3_call(
        m3_executable: str, child_env: dict[str, str]) -> None:
    params = StdioServerParameters(
        command=m3_executable, args=[],
        env={name: child_env[name] for name in ("M3_HOME", "M3_STORE_URL", "PATH", "PYTHONPATH")},
    )
    with trio.fail_after(60):
        async with Client(params, mode="legacy") as client:
            assert {t.name for t in (await client.list_tools()).tools} == STARTUP_TOOLS
            written = structured(await client.call_tool("memory_write", {
                "type": "decision", "title": "project-database", "content": "We chose PostgreSQL for our website."}))
            # Found by keyword at once, before its vector exists.
            found = structured(await client.call_tool("memory_search", {"query": "PostgreSQL website", "k": 1}))
            assert [item["id"] for item in found["items"]] == [written["id"]]
            pinned = structured(await client.call_tool("m3_call", {"tool": "memory_pin",
                                                                   "args": {"id": written["id"]}}))
            assert pinned["result"] == {"id": written["id"], "pinned": True}
            record = structured(await client.call_tool("memory_get", {"id": written["id"]}))
            assert record["pinned"] is True
