"""The engine: one process per store that every front-end relays to, started on first use.

Covers the socket's permissions, two front-ends starting at once (one engine), a killed engine being
replaced by the next call, an engine of another version (replaced when idle, refused when busy), and a
wait in one front-end woken by a notify from another within a bounded time.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx2
import pytest
import trio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from m3.config import load_config
from m3.gateway.engine import client
from m3.gateway.engine.paths import engine_paths, wait_lock
from tests.gateway.engine.wake import wake_across
from tests.gateway.outcomes import Run
from tests.processes import race

RACE_SCRIPT = """
import sys
print("ready", flush=True)
sys.stdin.readline()
from m3.gateway.cli import main
sys.exit(main(sys.argv[1:]))
"""

#: An engine that reports another m3 version (the engine of an older install still running).
OLD_ENGINE = """
import m3
m3.__version__ = "0.0.old"
from m3.gateway.engine.server import main
raise SystemExit(main())
"""


PLUMBING = pytest.mark.store_only("sqlite", reason="engine process plumbing: the store only changes the URL the "
                                 "engine opens (the kill -9 test keeps its write on both stores)")


def engine_of(env: dict[str, str]) -> dict[str, Any] | None:
    return client.status(engine_paths(load_config(env)).sock)


@PLUMBING
@pytest.mark.fresh_files
def test_the_socket_is_owner_only_in_an_owner_only_folder(m3: Run, env: dict[str, str]) -> None:
    started = m3("engine", "start")
    assert started.status == 0, started.err
    status = started.document()
    assert status["running"] and status["started"]
    sock = Path(status["socket"])
    assert stat.S_ISSOCK(sock.stat().st_mode)
    assert stat.S_IMODE(sock.stat().st_mode) == 0o600
    assert stat.S_IMODE(sock.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(engine_paths(load_config(env)).pid.stat().st_mode) == 0o600
    again = m3("engine", "start").document()
    assert (again["started"], again["pid"]) == (False, status["pid"])
    assert m3("engine", "stop").document() == {"stopped": True, "pid": status["pid"]}
    assert not sock.exists()
    assert m3("engine", "status").document()["running"] is False


@PLUMBING
def test_front_ends_starting_at_once_make_one_engine(child_env: dict[str, str], env: dict[str, str]) -> None:
    argv = [["memory", "write", "--content", f"race write number {i}"] for i in range(4)]
    outcomes = race(RACE_SCRIPT, argv, child_env, timeout=120)
    assert [code for code, _, _ in outcomes] == [0, 0, 0, 0], [err for _, _, err in outcomes]
    ids = {json.loads(out)["id"] for _, out, _ in outcomes}
    assert len(ids) == 4
    status = engine_of(env)
    assert status is not None
    log = Path(status["log"]).with_name("m3.log").read_text(encoding="utf-8")
    assert log.count("listening on") == 1, log  # one engine started, the others found it


def test_a_killed_engine_is_replaced_by_the_next_call_and_kept_the_acknowledged_write(m3: Run, env: dict[str, str]
                                                                                      ) -> None:
    written = m3("memory", "write", "--content", "written before the crash")
    assert written.status == 0, written.stderr
    first = engine_of(env)
    assert first is not None
    os.kill(first["pid"], signal.SIGKILL)
    fd = os.open(engine_paths(load_config(env)).pid, os.O_RDONLY)
    try:
        assert wait_lock(fd, 10)  # the kernel lets go of the dead engine's life lock
    finally:
        os.close(fd)
    found = m3("memory", "get", "--id", written.document()["id"])
    assert found.status == 0, found.err
    assert found.document()["content"] == "written before the crash"
    second = engine_of(env)
    assert second is not None and second["pid"] != first["pid"]


def _start_old_engine(child_env: dict[str, str], tmp_path: Path) -> subprocess.Popen[str]:
    with (tmp_path / "old-engine.log").open("w") as log:
        child = subprocess.Popen([sys.executable, "-c", OLD_ENGINE], env=child_env, stdout=subprocess.PIPE,
                                 stderr=log, text=True, start_new_session=True)
    assert child.stdout is not None
    line = child.stdout.readline()
    child.stdout.close()
    assert json.loads(line).get("ready"), line
    return child


@PLUMBING
def test_an_idle_engine_of_another_version_is_replaced(m3: Run, child_env: dict[str, str], env: dict[str, str],
                                                       tmp_path: Path) -> None:
    old = _start_old_engine(child_env, tmp_path)
    try:
        assert (engine_of(env) or {}).get("version") == "0.0.old"
        written = m3("memory", "write", "--content", "after an upgrade")
        assert written.status == 0, written.stderr
        old.wait(timeout=60)  # it was stopped, in order
        now = engine_of(env)
        assert now is not None and now["version"] != "0.0.old" and now["pid"] != old.pid
    finally:
        if old.poll() is None:
            old.kill()
            old.wait()


@PLUMBING
def test_a_busy_engine_of_another_version_is_refused_with_a_coded_error(m3: Run, child_env: dict[str, str],
                                                                        env: dict[str, str], tmp_path: Path) -> None:
    old = _start_old_engine(child_env, tmp_path)
    sock = engine_paths(load_config(env)).sock
    old_headers = {client.VERSION_HEADER: "0.0.old", client.AGENT_HEADER: "waiter"}
    try:
        assert client.call_tool(sock, "agent_register", {}, old_headers)[0] == 200
        def wait() -> None:
            with contextlib.suppress(client.EngineLost):  # the old engine stops at the end of the test
                client.call_tool(sock, "notifications_wait", {"timeout": 120}, old_headers)

        waiting = threading.Thread(target=wait, daemon=True)
        waiting.start()
        deadline = time.monotonic() + 10
        while (engine_of(env) or {}).get("inflight", 0) < 1:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        refused = m3("memory", "write", "--content", "while the old engine works")
        assert refused.status == 1
        error = json.loads(refused.stderr.strip().splitlines()[-1])["error"]
        assert error["code"] == "engine_version_mismatch"
        assert error["details"]["engine_version"] == "0.0.old" and error["details"]["busy"] >= 1
        assert "m3 engine stop" in error["hint"]
        assert old.poll() is None  # left running
    finally:
        old.send_signal(signal.SIGTERM)
        old.wait(timeout=60)


def test_a_wait_in_one_front_end_wakes_within_a_bound_of_a_notify_from_another(m3: Run, env: dict[str, str]
                                                                                ) -> None:
    """Two front-ends (threads relaying as two agents): the wait returns soon after the notify is acknowledged."""
    config = load_config(env)
    body, delay = wake_across(config, config, "review ready")
    assert [n["message"] for n in body["items"]] == ["review ready"]
    assert delay < 1.0  # far inside the 20 s timeout: woken, not timed out


@PLUMBING
def test_the_engine_serves_its_own_model_as_the_embed_server_s_routes(m3: Run, env: dict[str, str],
                                                                        embedder: Any) -> None:
    assert m3("engine", "start").status == 0
    sock = engine_paths(load_config(env)).sock
    code, models = client.request(sock, "GET", "/embed/v1/models", timeout=10)
    assert code == 200, models
    model = models["data"][0]["id"]
    code, body = client.request(sock, "POST", "/embed/v1/embeddings",
                                {"model": model, "input": ["the deploy key rotates"]}, timeout=60)
    assert code == 200, body
    vector = body["data"][0]["embedding"]
    assert len(vector) == 384
    expected = embedder.embed(["the deploy key rotates"])[0]
    assert max(abs(a - float(b)) for a, b in zip(vector, expected, strict=True)) < 1e-5
    assert body["model"] == model


@PLUMBING
def test_status_with_stats_reports_each_actor_and_an_idle_engine_exits_by_itself(
        m3: Run, child_env: dict[str, str], env: dict[str, str]) -> None:
    child_env["M3_ENGINE_IDLE_EXIT_S"] = "3"
    assert m3("memory", "write", "--content", "counted by the writer").status == 0
    stats = m3("engine", "status", "--stats").document()
    actors = {row["actor"]: row for row in stats["actors"]}
    assert {"writer", "searcher", "embedder", "directory", "tasks", "routers", "handler"} <= set(actors)
    writer = actors["writer"]
    assert writer["handled"] >= 1 and writer["failed"] == 0 and writer["queue_depth"] == 0
    # Handling time per message (the actor's own window) and whole tool calls answered by it (the engine's).
    assert writer["latency"]["samples"] >= 1 and writer["latency"]["p50_ms"] is not None
    assert writer["call_latency"]["samples"] >= 1 and writer["call_latency"]["p99_ms"] is not None
    # Where its CPU went, by thread (the gateway is the main thread, each actor has its own), and how often
    # the collector ran; start-up's objects are frozen out of full collections.
    assert stats["thread_cpu_s"]["MainThread"] > 0 and any(name.startswith("Writer") for name in stats["thread_cpu_s"])
    assert len(stats["gc_collections"]) == 3 and stats["gc_frozen"] > 10_000
    fd = os.open(engine_paths(load_config(env)).pid, os.O_RDONLY)
    try:
        assert wait_lock(fd, 30)  # idle for engine.idle_exit_s: it exits on its own
    finally:
        os.close(fd)
    assert m3("engine", "status").document()["running"] is False


@PLUMBING
def test_the_engine_builds_its_mcp_server_on_the_first_request_to_mcp_and_never_for_tool_calls(
        m3: Run, env: dict[str, str]) -> None:
    """The CLI's tool calls go to the tool routes, so the MCP SDK is not even imported; an MCP client of the socket
    (the official SDK over the Unix socket) is served on its first request all the same."""
    assert m3("memory", "write", "--content", "the MCP server waits for a client").status == 0
    assert m3("memory", "search", "--query", "MCP server").status == 0
    status = m3("engine", "status").document()
    assert status["mcp_started"] is False

    async def listed() -> tuple[list[str], dict[str, Any]]:
        transport = httpx2.AsyncHTTPTransport(uds=status["socket"])
        async with httpx2.AsyncClient(transport=transport, timeout=httpx2.Timeout(30, read=60)) as http, \
                Client(streamable_http_client("http://engine/mcp", http_client=http), mode="legacy") as mcp:
            names = [t.name for t in (await mcp.list_tools()).tools]
            found = await mcp.call_tool("memory_search", {"query": "MCP server"})
        assert found.structured_content is not None
        return names, found.structured_content

    names, found = trio.run(listed)
    assert {"memory_write", "memory_search", "m3_call"} <= set(names)
    assert [item["content"] for item in found["items"]] == ["the MCP server waits for a client"]
    assert m3("engine", "status").document()["mcp_started"] is True


@PLUMBING
def test_an_engine_stopped_right_after_it_started_leaves_no_traceback_in_its_log(m3: Run, env: dict[str, str]
                                                                                  ) -> None:
    """The query model loads on a background thread (derived first in a home without it, seconds of work); a stop
    waits for it instead of exiting under it (which aborted the process in onnxruntime's loader)."""
    shutil.rmtree(load_config(env).home / "models" / "minilm-queries")
    started = m3("engine", "start").document()
    assert m3("engine", "stop").status == 0
    log_text = Path(started["log"]).read_text(encoding="utf-8")
    assert "Traceback" not in log_text and "terminate called" not in log_text
