"""Reliability rules end to end: no lost writes under load or kill -9, and bad input changes nothing."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from sqlalchemy import text

from m3.actors.system import ActorSystem
from m3.config import Config
from m3.embed.minilm import MiniLMEmbedder
from m3.errors import M3Error
from m3.gateway.registry import default_registry
from m3.gateway.service import CallContext, Service
from tests.helpers import call
from tests.stored import count, dump, existing_ids, fresh, is_postgres

REPO_ROOT = Path(__file__).resolve().parents[1]
THREADS, WRITES = 16, 40
CTX = CallContext(agent_id="reliability")


@pytest.fixture
def busy_service(config: Config, embedder: MiniLMEmbedder) -> Iterator[Service]:
    """A service whose shutdown does not wait for the vectors of hundreds of fresh writes."""
    system = ActorSystem(config, embedder).start()
    yield Service(config, system, default_registry())
    system.stop(drain_embeddings=False)


def write_args(t: int, i: int) -> dict[str, Any]:
    return {"type": "event", "content": f"Load test write {i} from client {t}."}


# -- (a) concurrent writes through the service ---------------------------------------------------

def test_sixteen_threads_each_running_trio_lose_no_acknowledged_write(
        busy_service: Service, store_url: str) -> None:
    acked: list[str] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def client(t: int) -> None:
        for i in range(WRITES):
            try:
                out = trio.run(busy_service.call, "memory_write", write_args(t, i), CTX)
            except BaseException as exc:
                with lock:
                    errors.append(exc)
                continue
            with lock:
                acked.append(out["id"])

    threads = [threading.Thread(target=client, args=(t,)) for t in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=120)
    assert errors == []
    assert len(set(acked)) == THREADS * WRITES
    assert existing_ids(store_url, acked) == set(acked)
    assert count(store_url, "memories") == THREADS * WRITES


def test_sixteen_trio_tasks_in_one_nursery_lose_no_acknowledged_write(busy_service: Service, store_url: str) -> None:
    acked: list[str] = []

    async def client(t: int) -> None:
        for i in range(WRITES):
            out = await busy_service.call("memory_write", write_args(t, i), CTX)
            acked.append(out["id"])

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            for t in range(THREADS):
                nursery.start_soon(client, t)

    trio.run(main)  # any error would surface here as an exception group
    assert len(set(acked)) == THREADS * WRITES
    assert existing_ids(store_url, acked) == set(acked)
    assert count(store_url, "memories") == THREADS * WRITES


# -- (b) kill -9 in the middle of acknowledged writes --------------------------------------------

WRITER_SCRIPT = """
import sys, threading
from m3.actors.system import ActorSystem
from m3.config import load_config
from m3.protocols.messages.memory import NewMemory, WriteMemories

system = ActorSystem(load_config()).start()
lock = threading.Lock()

def client(t):
    i = 0
    while True:
        mem = NewMemory(type="event", content=f"kill test write {i} from client {t}")
        out = system.writer.ask(WriteMemories(memories=(mem,), actor="killtest"), 30)
        with lock:  # one write(2) per id: a pipe write this small is atomic
            sys.stdout.write(out[0].id + "\\n")
            sys.stdout.flush()
        i += 1

for t in range(4):
    threading.Thread(target=client, args=(t,), daemon=True).start()
threading.Event().wait()
"""


NEWLINE = b"\n"


def read_ids(fd: int, buffer: bytearray, want: int, deadline: float) -> list[str]:
    """Complete lines from ``fd`` until ``want`` of them (or end of file) arrive, bounded by ``deadline``."""
    while buffer.count(b"\n") < want:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            raise AssertionError(f"only {bytes(buffer).count(NEWLINE)} acknowledged writes before the deadline")
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        buffer.extend(chunk)
    return [line.decode() for line in bytes(buffer).split(b"\n")[:-1]]


def test_every_write_acknowledged_before_a_kill_9_is_in_the_store_afterwards(
        env: dict[str, str], config: Config, embedder: MiniLMEmbedder, store_url: str, tmp_path: Path) -> None:
    child_env = {**env, "PYTHONPATH": str(REPO_ROOT), "M3_EMBED_THREADS": "1"}
    stderr_path = tmp_path / "writer.stderr"
    with stderr_path.open("wb") as stderr:  # a file, not a pipe: a chatty child can never block on it
        child = subprocess.Popen([sys.executable, "-c", WRITER_SCRIPT], stdout=subprocess.PIPE, stderr=stderr,
                                 env=child_env)
    assert child.stdout is not None
    fd, buffer = child.stdout.fileno(), bytearray()
    try:
        read_ids(fd, buffer, 150, time.monotonic() + 60)
        child.send_signal(signal.SIGKILL)
    finally:
        if child.poll() is None:
            child.kill()
        child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL, stderr_path.read_text(errors="replace")
    acked = read_ids(fd, buffer, 10**9, time.monotonic() + 10)  # what the pipe still held was acknowledged too
    child.stdout.close()
    assert len(acked) >= 150
    assert existing_ids(store_url, acked) == set(acked)
    if not is_postgres(store_url):  # the killed process held the SQLite file itself; a PostgreSQL server lives on
        with fresh(store_url) as conn:
            assert conn.execute(text("PRAGMA integrity_check")).scalar_one() == "ok"
    system = ActorSystem(config, embedder).start()  # the store opens and works after the crash
    try:
        system.wait_embedded()
        assert count(store_url, "memory_embeddings") == count(store_url, "memories")
    finally:
        system.stop()


# -- (c) bad input changes nothing ---------------------------------------------------------------

UNKNOWN = "00000000-dead-4eef-8000-000000000000"


def bad_calls(existing: str) -> list[tuple[str, dict[str, Any], str]]:
    return [
        ("memory_get", {"id": UNKNOWN}, "not_found"),
        ("memory_get", {"id": "short"}, "invalid_argument"),
        ("memory_pin", {"id": UNKNOWN}, "not_found"),
        ("memory_unpin", {"id": UNKNOWN}, "not_found"),
        ("memory_supersede", {"id": UNKNOWN, "content": "a correction"}, "not_found"),
        ("memory_supersede", {"id": existing, "content": "   "}, "invalid_argument"),
        ("memory_update", {"id": UNKNOWN, "content": "changed"}, "not_found"),
        ("memory_delete", {"id": UNKNOWN}, "not_found"),
        ("memory_delete", {"id": UNKNOWN, "hard": True, "confirm": True}, "not_found"),
        ("memory_delete", {"id": existing, "hard": True}, "confirmation_required"),
        ("memory_link", {"from_id": UNKNOWN, "to_id": existing}, "not_found"),
        ("memory_link", {"from_id": existing, "to_id": existing, "type": "nonsense"}, "invalid_argument"),
        ("memory_history", {"id": UNKNOWN}, "not_found"),
        ("memory_search", {"query": "database", "as_of": "yesterday"}, "invalid_time"),
        ("memory_search", {"query": "database", "as_of": "2026-13-45T00:00:00Z"}, "invalid_time"),
        ("memory_search", {"query": "database", "as_of": 12345}, "invalid_time"),
        ("memory_search", {"query": "database", "k": -1}, "invalid_argument"),
        ("memory_search", {"query": "database", "k": 0}, "invalid_argument"),
        ("memory_search", {"query": "database", "k": 201}, "invalid_argument"),
        ("memory_search", {"query": "database", "k": 10**12}, "invalid_argument"),
        ("memory_search", {"query": "database", "k": "many"}, "invalid_argument"),
        ("memory_write", {"content": "x", "importance": 2}, "invalid_argument"),
    ]


@pytest.fixture
def seeded(service: Service, system: ActorSystem) -> str:
    """Three memories, one superseded by similarity, and the id of the current fact; everything settled."""
    call(service, "memory_write", type="fact", content="The API uses the old PostgreSQL version")
    system.wait_embedded()
    call(service, "memory_write", type="fact", content="The API uses the newest PostgreSQL version")
    call(service, "memory_write", type="note", content="Database upgrades are announced in the ops channel.")
    system.wait_embedded()
    current: str = call(service, "memory_search", query="PostgreSQL", type="fact")["items"][0]["id"]
    system.wait_embedded()  # the search's access statistics are written too
    return current


def test_bad_input_gets_a_coded_error_and_changes_nothing(service: Service, system: ActorSystem, seeded: str,
                                                          store_url: str) -> None:
    before = dump(store_url)
    assert len(before["memories"]) == 3
    assert len(before["memory_relationships"]) == 1
    problems = []
    for tool, args, code in bad_calls(seeded):
        try:
            call(service, tool, **args)
        except M3Error as exc:
            if exc.code != code or not exc.hint:
                problems.append(f"{tool} {args}: {exc.code} {exc.message!r}, expected {code}")
        else:
            problems.append(f"{tool} {args}: no error")
        system.wait_embedded()
        after = dump(store_url)
        if after != before:
            problems.append(f"{tool} {args} changed the store")
            before = after
    assert problems == []


def test_a_link_to_an_unknown_memory_changes_nothing(service: Service, system: ActorSystem, seeded: str,
                                                     store_url: str) -> None:
    before = dump(store_url)
    with pytest.raises(M3Error) as err:
        call(service, "memory_link", from_id=seeded, to_id=UNKNOWN)
    assert err.value.code == "not_found"
    system.wait_embedded()
    assert dump(store_url) == before


def test_a_memory_dated_before_the_year_1000_is_stored_and_does_not_break_search(
        service: Service, system: ActorSystem) -> None:
    written = call(service, "memory_write", content="Charlemagne was crowned emperor in Rome.",
                   valid_from="0800-12-25T00:00:00Z")
    found = call(service, "memory_search", query="Charlemagne emperor")
    assert [i["id"] for i in found["items"]] == [written["id"]]
    assert call(service, "memory_search", query="Charlemagne", as_of="0999-01-01T00:00:00Z")["count"] == 0


def test_a_time_before_the_year_1000_goes_out_as_iso_8601(service: Service) -> None:
    written = call(service, "memory_write", content="Charlemagne was crowned emperor in Rome.",
                   valid_from="0800-12-25T00:00:00Z")
    assert call(service, "memory_get", id=written["id"])["valid_from"] == "0800-12-25T00:00:00.000000Z"
