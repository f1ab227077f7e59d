"""kill -9 of the engine in the middle of acknowledged writes: every write a front-end was told about is in
the store afterwards, and the next call starts a new engine on the same store (the reliability test of
tests/test_reliability.py, with the actors in the engine and the writers as front-ends)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from sqlalchemy import text

from m3.config import load_config
from m3.gateway.engine import client
from m3.gateway.engine.calls import relay
from m3.gateway.engine.paths import engine_paths, settings_fingerprint, wait_lock
from m3.gateway.engine.spawn import ensure_engine
from tests.gateway.conftest import REPO_ROOT
from tests.stored import count, existing_ids, fresh, is_postgres
from tests.test_reliability import read_ids

#: Four client threads sending writes to the engine; each acknowledged id on its own line. They call the engine's
#: socket directly, not through ``relay``: a thread between two calls when the engine dies would otherwise be
#: refused at its next call, start a new engine (relay's rule) and write on for ever.
FRONT_END = """
import sys, threading
from m3.config import load_config
from m3.gateway.engine import client
from m3.gateway.engine.paths import engine_paths

sock = engine_paths(load_config()).sock
lock = threading.Lock()

def writer(t):
    i = 0
    headers = client.identity_headers("killtest", "")
    while True:
        try:
            args = {"type": "event", "content": f"engine kill write {i} from client {t}"}
            status, body = client.call_tool(sock, "memory_write", args, headers)
        except Exception:
            return  # the engine died under this call: not acknowledged
        if status != 200:
            return
        with lock:
            sys.stdout.write(body["id"] + "\\n")
            sys.stdout.flush()
        i += 1

threads = [threading.Thread(target=writer, args=(t,)) for t in range(4)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
"""


def test_every_write_acknowledged_before_the_engine_is_killed_is_in_the_store_and_the_next_call_restarts_it(
        env: dict[str, str], store_url: str, tmp_path: Path) -> None:
    child_env = {**env, "PYTHONPATH": str(REPO_ROOT), "M3_EMBED_THREADS": "1"}
    config = load_config(child_env)
    engine = ensure_engine(config)
    with (tmp_path / "front-end.stderr").open("wb") as stderr:
        child = subprocess.Popen([sys.executable, "-c", FRONT_END], stdout=subprocess.PIPE, stderr=stderr,
                                 env=child_env)
    assert child.stdout is not None
    fd, buffer = child.stdout.fileno(), bytearray()
    try:
        read_ids(fd, buffer, 150, time.monotonic() + 60)
        os.kill(engine["pid"], signal.SIGKILL)
        child.wait(timeout=60)  # its writers stop at the first call the engine did not answer
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    acked = read_ids(fd, buffer, 10**9, time.monotonic() + 10)
    child.stdout.close()
    assert len(acked) >= 150
    pid_fd = os.open(engine_paths(config).pid, os.O_RDONLY)
    try:
        assert wait_lock(pid_fd, 10)  # the killed engine is gone
    finally:
        os.close(pid_fd)
    assert existing_ids(store_url, acked) == set(acked)
    if not is_postgres(store_url):
        with fresh(store_url) as conn:
            assert conn.execute(text("PRAGMA integrity_check")).scalar_one() == "ok"
    as_writer = client.identity_headers("killtest", "", settings_fingerprint(config))
    status, body = relay(config, "memory_get", {"id": acked[0]}, headers=as_writer)  # a new engine, same store
    assert status == 200 and body["id"] == acked[0]
    restarted = client.status(engine_paths(config).sock)
    assert restarted is not None and restarted["pid"] != engine["pid"]
    assert count(store_url, "memories") >= len(acked)
