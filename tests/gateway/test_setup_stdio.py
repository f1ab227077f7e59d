"""The entry ``m3 setup`` writes for a client starts a working MCP server, as that client would start it.

The command, arguments and variables are read back from the written file and run by the official SDK's
stdio client; the server lists its tools and records a write under the client's own agent id.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio
from mcp import Client, StdioServerParameters

from m3.gateway.setup.clients import Places
from m3.gateway.setup.run import run_setup
from tests.gateway.test_mcp_stdio import STARTUP_TOOLS, structured

pytestmark = pytest.mark.anyio


async def test_the_entry_written_for_cursor_starts_m3_which_acts_as_cursor(
        tmp_path: Path, child_env: dict[str, str]) -> None:
    home = tmp_path / "home"
    (home / ".cursor").mkdir(parents=True)
    run_setup(Places.of({"PATH": str(home), "M3_HOME": child_env["M3_HOME"]}, home=home))
    entry = json.loads((home / ".cursor" / "mcp.json").read_text(encoding="utf-8"))["mcpServers"]["m3"]

    # What a client adds of its own environment: the search path, and here the store under test.
    inherited = {name: child_env[name] for name in ("PATH", "PYTHONPATH", "M3_STORE_URL")}
    params = StdioServerParameters(command=entry["command"], args=entry["args"], env={**inherited, **entry["env"]})
    with trio.fail_after(60):
        async with Client(params, mode="legacy") as client:
            assert {t.name for t in (await client.list_tools()).tools} == STARTUP_TOOLS
            written = structured(await client.call_tool("memory_write", {
                "type": "note", "title": "wired", "content": "Cursor reaches m3 through the entry m3 setup wrote."}))
            record = structured(await client.call_tool("memory_get", {"id": written["id"]}))
            assert record["agent_id"] == "cursor"
