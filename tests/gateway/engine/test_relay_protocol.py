"""Bare ``m3`` speaks MCP's JSON-RPC on stdio itself: what no SDK client sends on its own, line by line.

A real ``m3`` process on real pipes, relaying to a real engine. The official SDK client covers the ordinary
session (test_relay.py, test_mcp_stdio.py and below); here are the protocol's edges: version negotiation,
ping, malformed and unknown messages, cancellation of a parked call, and calls running side by side.
"""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any

import mcp_types as types
import pytest
import trio
from mcp import Client, StdioServerParameters

from m3.config import load_config
from m3.gateway.engine import client
from m3.gateway.engine.paths import engine_paths

pytestmark = pytest.mark.anyio

ANSWER_S = 30.0  # generous bound for one answer on a loaded machine
START_S = 120.0  # the first answer: m3 starts the store's engine (the model loads) before it reads stdin


class Stdio:
    """An ``m3`` child process spoken to in raw JSON-RPC lines; every line it writes is kept in order."""

    def __init__(self, command: str, env: dict[str, str]):
        self.process = subprocess.Popen([command], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, env=env)
        self.lines: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.answered = False
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(json.loads(line))
        self.lines.put(None)

    def send(self, message: dict[str, Any] | bytes) -> None:
        assert self.process.stdin is not None
        data = message if isinstance(message, bytes) else json.dumps(message).encode()
        self.process.stdin.write(data + b"\n")
        self.process.stdin.flush()

    def request(self, request_id: int | str, method: str, params: dict[str, Any] | None = None) -> None:
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method,
                   **({"params": params} if params is not None else {})})

    def next(self) -> dict[str, Any]:
        message = self.lines.get(timeout=ANSWER_S if self.answered else START_S)
        self.answered = True
        assert message is not None, "m3 closed its stdout"
        return message

    def answer(self, request_id: int | str) -> dict[str, Any]:
        """The answer to ``request_id``; fails on any other message before it (none is expected here)."""
        message = self.next()
        assert message.get("id") == request_id, message
        return message

    def call(self, request_id: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        self.request(request_id, "tools/call", {"name": name, "arguments": arguments})
        result: dict[str, Any] = self.answer(request_id)["result"]
        return result


@pytest.fixture
def stdio(m3_executable: str, child_env: dict[str, str]) -> Iterator[Stdio]:
    env = {name: child_env[name] for name in ("M3_HOME", "M3_STORE_URL", "PATH", "PYTHONPATH")}
    peer = Stdio(m3_executable, {**env, "M3_IDENTITY_AGENT_ID": "alice"})
    try:
        yield peer
    finally:
        if peer.process.poll() is None:
            peer.process.kill()
        peer.process.wait(timeout=ANSWER_S)
        peer.reader.join(timeout=ANSWER_S)  # it reads to the end of the dead process's output
        for pipe in (peer.process.stdin, peer.process.stdout):
            if pipe is not None and not pipe.closed:
                pipe.close()


def test_the_handshake_negotiates_the_version_and_bad_messages_get_json_rpc_errors_while_the_session_goes_on(
        stdio: Stdio) -> None:
    stdio.request(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "raw", "version": "0"}})
    agreed = stdio.answer(1)["result"]
    assert agreed["protocolVersion"] == "2025-06-18"
    assert agreed["capabilities"] == {"tools": {"listChanged": True}}
    assert agreed["serverInfo"]["name"] == "m3"
    assert "memory_search" in agreed["instructions"]
    stdio.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    stdio.request(2, "initialize", {"protocolVersion": "1999-01-01", "capabilities": {},
                                    "clientInfo": {"name": "raw", "version": "0"}})
    assert stdio.answer(2)["result"]["protocolVersion"] == "2025-11-25"  # a version it does not speak: its newest
    stdio.request("p", "ping")
    assert stdio.answer("p") == {"jsonrpc": "2.0", "id": "p", "result": {}}
    # Malformed and unknown messages get the JSON-RPC errors, and the session goes on.
    stdio.send(b"{not json")
    assert stdio.next()["error"]["code"] == -32700
    stdio.send(b"[1, 2]")
    assert stdio.next() == {"jsonrpc": "2.0", "id": None, "error": {
        "code": -32600, "message": "Invalid Request: a message must be a JSON object"}}
    stdio.send({"jsonrpc": "1.0", "id": 3, "method": "ping"})
    assert stdio.answer(3)["error"]["code"] == -32600
    stdio.request(4, "server/discover", {})  # the stateless era: "not here", so a client falls back
    assert stdio.answer(4)["error"]["code"] == -32601
    stdio.request(5, "resources/list", {})
    assert stdio.answer(5)["error"]["code"] == -32601
    stdio.send({"jsonrpc": "2.0", "id": 6, "method": "tools/list", "params": [1]})
    assert stdio.answer(6)["error"]["code"] == -32602
    stdio.send({"jsonrpc": "2.0", "method": "notifications/whatever"})  # an unknown notification: ignored
    stdio.send({"jsonrpc": "2.0", "id": 99, "result": {}})  # a response to nothing this side asked: ignored
    stdio.request(7, "tools/call", {"name": "no_such_tool", "arguments": {}})
    unknown = stdio.answer(7)["error"]
    assert unknown["code"] == -32602 and "m3_index" in unknown["message"]
    stdio.request(8, "tools/call", {"name": "memory_write", "arguments": "text"})
    assert stdio.answer(8)["error"]["code"] == -32602
    refused = stdio.call(9, "memory_write", {"content": ""})  # the engine's refusal is a tool error, not a protocol one
    assert refused["isError"] is True
    assert refused["structuredContent"]["error"]["code"] == "invalid_argument"
    assert json.loads(refused["content"][0]["text"]) == refused["structuredContent"]
    stdio.request(10, "ping")
    assert stdio.answer(10)["result"] == {}


def test_a_cancelled_wait_is_dropped_a_parked_wait_holds_up_no_other_call_and_eof_ends_the_session(
        stdio: Stdio, env: dict[str, str]) -> None:
    sock = engine_paths(load_config(env)).sock
    stdio.call(1, "m3_call", {"tool": "agent_register", "args": {}})
    stdio.request(2, "tools/call", {"name": "tools_load_domain", "arguments": {"domain": "notifications"}})
    assert stdio.next() == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}  # before the answer
    assert "notifications_wait" in stdio.answer(2)["result"]["structuredContent"]["registered"]
    stdio.request(3, "tools/call", {"name": "notifications_wait", "arguments": {"timeout": 60}})
    deadline = time.monotonic() + ANSWER_S
    while (client.status(sock) or {}).get("inflight", 0) < 1:  # the engine holds the wait
        assert time.monotonic() < deadline
        time.sleep(0.005)
    written = stdio.call(4, "memory_write", {"content": "written while a wait is parked"})
    assert not written["isError"]
    stdio.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3,
                                                                                 "reason": "user stopped"}})
    stdio.request(5, "ping")
    assert stdio.answer(5)["result"] == {}
    # A notify now ends the engine's wait at once: had the cancellation not dropped call 3, its answer would
    # come back here, before the next calls' answers.
    notified = stdio.call(6, "m3_call", {"tool": "notify", "args": {"to_agent": "alice", "message": "wake"}})
    assert not notified["isError"]
    found = stdio.call(7, "memory_get", {"id": written["structuredContent"]["id"]})
    assert found["structuredContent"]["content"] == "written while a wait is parked"
    stdio.request(8, "ping")
    assert stdio.answer(8)["result"] == {}
    assert stdio.lines.qsize() == 0
    # Closing stdin ends the front-end at once and cleanly, even with a call parked (the wake-up is
    # acknowledged first, or that wait would return at once with it).
    pending = stdio.call(10, "m3_call", {"tool": "notifications_poll", "args": {}})["structuredContent"]["result"]
    acked = stdio.call(11, "m3_call", {"tool": "notifications_ack",
                                       "args": {"ids": [n["id"] for n in pending["items"]]}})
    assert acked["structuredContent"]["result"]["acked"] == 1
    stdio.request(9, "tools/call", {"name": "m3_call", "arguments": {"tool": "notifications_wait",
                                                                     "args": {"timeout": 60}}})
    deadline = time.monotonic() + ANSWER_S
    while (client.status(sock) or {}).get("inflight", 0) < 1:
        assert time.monotonic() < deadline
        time.sleep(0.005)
    assert stdio.process.stdin is not None
    began = time.monotonic()
    stdio.process.stdin.close()
    assert stdio.process.wait(timeout=ANSWER_S) == 0
    assert time.monotonic() - began < 10.0  # not held until the wait's 60 s timeout


async def test_the_sdk_client_in_its_default_mode_falls_back_to_the_handshake_and_hears_list_changed(
        m3_executable: str, child_env: dict[str, str]) -> None:
    env = {name: child_env[name] for name in ("M3_HOME", "M3_STORE_URL", "PATH", "PYTHONPATH")}
    params = StdioServerParameters(command=m3_executable, args=[], env={**env, "M3_IDENTITY_AGENT_ID": "bob"})
    heard: list[str] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            heard.append(message.method)

    with trio.fail_after(60):
        async with Client(params, message_handler=on_message) as sdk:  # mode "auto": server/discover first
            assert sdk.session.initialize_result is not None  # server/discover refused: the handshake it is
            loaded = (await sdk.call_tool("tools_load_domain", {"domain": "task"})).structured_content
            assert loaded is not None and "task_claim" in loaded["registered"]
            assert heard == ["notifications/tools/list_changed"]
            assert "task_claim" in {t.name for t in (await sdk.list_tools()).tools}
            again = (await sdk.call_tool("tools_load_domain", {"domain": "task"})).structured_content
            assert again is not None and again["registered"] == []
            assert heard == ["notifications/tools/list_changed"]  # nothing new listed: no second notification
