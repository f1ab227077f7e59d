"""Several engines on one PostgreSQL store (as several machines on one database): wake-ups cross engines by
LISTEN/NOTIFY, and exactly one engine runs the embedder's backlog and the cognitive loop, another taking over when
it dies."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from m3.config import Config, load_config
from m3.gateway.engine import client
from m3.gateway.engine.calls import relay
from m3.gateway.engine.paths import engine_paths, settings_fingerprint
from m3.gateway.engine.spawn import ensure_engine
from tests.engines import stop_engines
from tests.gateway.engine.wake import wake_across

pytestmark = pytest.mark.store_only("postgres", reason="SQLite stores are one machine's: one engine each")

LEASE_RETRY_S = 0.2


def status(config: Config) -> dict[str, Any]:
    found = client.status(engine_paths(config).sock)
    assert found is not None
    return found


def loop_ticks(config: Config) -> bool:
    """Whether this engine's cognitive loop ticks (loop_status through the engine)."""
    code, body = relay(config, "loop_status", {}, headers=client.identity_headers(None, None))
    assert code == 200, body
    return bool(body["background"])


def test_two_engines_on_one_store_wake_each_other_and_share_one_backlog_runner(
        env: dict[str, str], tmp_path: Path) -> None:
    homes = [tmp_path / "machine-a", tmp_path / "machine-b"]
    configs = [load_config({**env, "M3_HOME": str(h), "M3_ENGINE_LEASE_RETRY_S": str(LEASE_RETRY_S)}) for h in homes]
    try:
        engines = [ensure_engine(c) for c in configs]
        assert engines[0]["pid"] != engines[1]["pid"]
        assert [e["shared_store"] for e in engines] == [True, True]
        assert sorted(e["background"]["embedder"] for e in engines) == [False, True]  # exactly one runner
        # The loop runs under the same lease: in the same engine, and in that one only.
        assert [loop_ticks(c) for c in configs] == [e["background"]["embedder"] for e in engines]

        a, b = configs
        fingerprints = (settings_fingerprint(a), settings_fingerprint(b))
        body, delay = wake_across(a, b, "from the other machine", fingerprints)
        assert [n["message"] for n in body["items"]] == ["from the other machine"]
        assert delay < 1.0  # woken by the other engine's NOTIFY, not by the 20 s timeout
        assert status(a)["wakes_from_other_engines"] >= 1

        holder, other = (a, b) if status(a)["background"]["embedder"] else (b, a)
        os.kill(status(holder)["pid"], signal.SIGKILL)
        deadline = time.monotonic() + 10  # the lease is retried every LEASE_RETRY_S
        while not status(other)["background"]["embedder"]:
            assert time.monotonic() < deadline, "the surviving engine did not take the lease over"
            time.sleep(0.05)
        assert loop_ticks(other)  # told when it took the lease (TakeBackground)
    finally:
        for home in homes:
            stop_engines(home / "run")
