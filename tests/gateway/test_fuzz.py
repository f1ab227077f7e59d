"""Fuzzing every tool with hostile arguments through the real MCP server and the real command line.

Each example calls one tool of the registry (through the official SDK client over the SDK's in-memory
transport, against the real server and actors) with arguments generated from the tool's JSON Schema by
``tests/fuzzing.py``. Whatever the arguments, the answer is a result or a coded tool error, never
``internal_error``, never ``store_error`` (the store is healthy, so only validation may refuse) and never a
protocol error; afterwards the store passes ``memory_verify`` and its own integrity check. A sample goes
through ``m3 <domain> <tool> --json-file -`` as a subprocess: exit 0 or 1, one JSON error, no traceback.
``M3_FUZZ_EXAMPLES`` sets the number of examples (CI: a few seconds); ``M3_FUZZ_REPORT=path`` writes the
counts of a run as JSON.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import math
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client

from m3.gateway.service import CallContext, Service
from tests.fuzzing import EXAMPLES, arguments
from tests.gateway.test_mcp_inprocess import connect

COUNTS: Counter[str] = Counter()
#: Where the admin tools' generated absolute paths are redirected (an export writes its file).
FUZZ_FILES = Path(tempfile.mkdtemp(prefix="m3-fuzz-files-"))
atexit.register(shutil.rmtree, FUZZ_FILES, True)
#: Read at import: the m3_home fixture clears every M3_* variable before a test runs.
REPORT = os.environ.get("M3_FUZZ_REPORT")
SLOWEST: Counter[str] = Counter()
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                       HealthCheck.data_too_large])


def tame(tool: str, args: Any) -> Any:
    """Keep a generated call from waiting long: notifications_wait's timeout (given or not) is capped at 50 ms."""
    if not isinstance(args, dict):
        return args
    if tool == "m3_call" and isinstance(args.get("tool"), str):
        return {**args, "args": tame(args["tool"], args.get("args"))}
    if tool.startswith("admin_") and isinstance(args.get("path"), str) and args["path"].startswith("/"):
        # An absolute path is used as given: keep generated files inside one folder of the fuzzer's own.
        digest = hashlib.sha256(args["path"].encode("utf-8", "surrogatepass")).hexdigest()[:16]
        return {**args, "path": str(FUZZ_FILES / digest)}
    if tool != "notifications_wait":
        return args
    timeout = args.get("timeout", 30.0)  # the default would wait 30 s
    try:
        seconds = float(timeout)  # validation takes "30" for 30 as well
    except (TypeError, ValueError, OverflowError):
        return args
    return args if math.isnan(seconds) else {**args, "timeout": min(seconds, 0.05)}


@pytest.fixture
def known_ids(service: Service) -> list[str]:
    """Ids of a real memory, agent and task, mixed into generated strings so that calls reach real rows."""
    async def seed() -> list[str]:
        ctx = CallContext(agent_id="local")
        memory = await service.call("memory_write", {"content": "The fuzzer's first memory.", "type": "fact"}, ctx)
        await service.call("agent_register", {"agent_id": "local"}, ctx)
        await service.call("agent_register", {"agent_id": "bob"}, CallContext(agent_id="bob"))
        task = await service.call("task_create", {"title": "fuzz me"}, ctx)
        return [memory["id"], task["id"], "bob", "local"]
    return trio.run(seed)


@pytest.fixture
def tool_names(service: Service) -> list[str]:
    return sorted(t.spec.name for t in service.registry)


@pytest.fixture
def mcp(service: Service) -> Iterator[Callable[[str, dict[str, Any]], str]]:
    """One MCP client session over the real server, kept open in a trio loop on a thread of its own (a
    hypothesis example cannot await); calling it runs one tool call there and returns its outcome."""
    ready: queue.Queue[trio.lowlevel.TrioToken] = queue.Queue()
    holder: dict[str, Client] = {}
    stop = threading.Event()

    async def serve() -> None:
        async with connect(service) as client:
            for domain in service.registry.domains():  # every tool callable by its own name
                await client.call_tool("tools_load_domain", {"domain": domain})
            await client.list_tools()
            holder["client"] = client
            ready.put(trio.lowlevel.current_trio_token())
            while not stop.is_set():
                await trio.sleep(0.05)  # polls the stop flag; tool calls arrive via from_thread

    loop = threading.Thread(target=trio.run, args=(serve,), daemon=True)
    loop.start()
    token = ready.get(timeout=60)

    def call(tool: str, args: dict[str, Any]) -> str:
        result = trio.from_thread.run(holder["client"].call_tool, tool, args, trio_token=token)
        if not result.is_error:
            return "ok"
        assert result.structured_content is not None, result.content  # a coded body, not plain text
        return f"error:{result.structured_content['error']['code']}"

    yield call
    stop.set()
    loop.join(timeout=30)


def test_no_tool_fails_internally_whatever_its_arguments(
        service: Service, store_url: str, store_kind: str, known_ids: list[str], tool_names: list[str],
        mcp: Callable[[str, dict[str, Any]], str]) -> None:
    COUNTS.clear()
    SLOWEST.clear()
    schemas = {name: service.registry.get(name).input_schema for name in tool_names}
    calls = st.sampled_from(tool_names).flatmap(
        lambda name: st.tuples(st.just(name), arguments(schemas[name], known=known_ids)))

    @FUZZ
    @given(call=calls)
    def one(call: tuple[str, dict[str, Any]]) -> None:
        tool, args = call
        COUNTS["calls"] += 1
        started = time.monotonic()
        outcome = mcp(tool, tame(tool, args))
        SLOWEST[tool] += round(time.monotonic() - started, 3)
        COUNTS[outcome] += 1
        # store_error is not a fault of the caller's: hostile input must stop at validation, before the store.
        assert outcome not in ("error:internal_error", "error:store_error"), (tool, args)

    try:
        one()
    finally:
        _report(store_kind)
    trio.run(_assert_store_sound, service)
    _assert_integrity(store_url)


async def _assert_store_sound(service: Service) -> None:
    verified = await service.call("memory_verify", {}, CallContext(agent_id="local"))
    assert verified["mismatched"] == []
    assert verified["ok"] == verified["checked"]  # the fuzzer may have deleted every memory


def _assert_integrity(store_url: str) -> None:
    engine = sa.create_engine(store_url)
    try:
        with engine.connect() as conn:
            if engine.dialect.name == "sqlite":
                assert conn.execute(sa.text("PRAGMA integrity_check")).scalar_one() == "ok"
            else:  # PostgreSQL: every table can still be read in full
                for table in ("memories", "memory_history", "chatlog", "inbox", "tasks", "agents"):
                    conn.execute(sa.text(f"SELECT * FROM {table}")).fetchall()
    finally:
        engine.dispose()


def _report(store: str) -> None:
    """Counts of this run into ``M3_FUZZ_REPORT`` with the store's name before the suffix (fuzz.sqlite.json)."""
    if REPORT:
        path = Path(REPORT)
        counts = {"counts": dict(sorted(COUNTS.items())), "seconds_by_tool": dict(SLOWEST.most_common())}
        path.with_name(f"{path.stem}.{store}{path.suffix}").write_text(json.dumps(counts, indent=2) + "\n",
                                                                      encoding="utf-8")


# -- a sample through the command line ---------------------------------------------------------------------

@pytest.fixture
def cli_tools(service: Service) -> Iterator[list[tuple[str, str, dict[str, Any]]]]:
    yield [(t.spec.domain, t.spec.name, t.input_schema) for t in service.registry
           if t.spec.name not in {"tools_load_domain"}]


def test_the_command_line_prints_one_json_error_and_never_a_traceback_for_hostile_arguments(
        m3_executable: str, child_env: dict[str, str], known_ids: list[str],
        cli_tools: list[tuple[str, str, dict[str, Any]]]) -> None:
    calls = st.sampled_from(cli_tools).flatmap(
        lambda t: st.tuples(st.just(t[0]), st.just(t[1]), arguments(t[2], known=known_ids)))

    @settings(FUZZ, max_examples=max(2, EXAMPLES // 20))  # each example starts a process: a few seconds
    @given(call=calls)
    def one(call: tuple[str, str, dict[str, Any]]) -> None:
        domain, tool, args = call
        done = subprocess.run([m3_executable, domain, tool, "--json-file", "-"], env=child_env,
                              input=json.dumps(tame(tool, args)), capture_output=True, text=True, timeout=120,
                              check=False)
        assert "Traceback" not in done.stderr, done.stderr
        assert done.returncode in (0, 1), done.stderr
        if done.returncode == 1:
            assert done.stdout == ""
            assert json.loads(done.stderr.strip().splitlines()[-1])["error"]["code"] != "internal_error"
        else:
            json.loads(done.stdout)

    one()
