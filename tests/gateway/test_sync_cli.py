"""`m3 sync now|status|log` through the real command line: two machines (homes, SQLite stores, engines) and one
embedded PostgreSQL warehouse."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.engines import stop_engines
from tests.gateway.conftest import REPO_ROOT
from tests.pg import TestCluster


@pytest.fixture
def machines(tmp_path: Path, pg_cluster: TestCluster, m3_executable: str) -> Iterator[dict[str, Any]]:
    warehouse = pg_cluster.new_database(migrated=False)
    base = {k: v for k, v in os.environ.items() if not k.startswith("M3_")}
    envs = {}
    for name in ("laptop", "desktop"):
        home = tmp_path / name
        envs[name] = {**base, "M3_HOME": str(home), "M3_STORE_URL": f"sqlite:///{home / 'm3.db'}",
                      "M3_SYNC_WAREHOUSE_URL": warehouse, "M3_IDENTITY_AGENT_ID": "me",
                      "PYTHONPATH": str(REPO_ROOT)}
    yield {"envs": envs, "exe": m3_executable}
    for env in envs.values():
        stop_engines(Path(env["M3_HOME"]) / "run")
    pg_cluster.drop(warehouse)


def m3(machines: dict[str, Any], name: str, *argv: str) -> Any:
    done = subprocess.run([machines["exe"], *argv], env=machines["envs"][name], capture_output=True, text=True,
                          timeout=180, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_memory_saved_on_the_laptop_is_recalled_on_the_desktop_after_both_sync(machines: dict[str, Any]) -> None:
    saved = m3(machines, "laptop", "memory", "write", "--content", "The VPN config is in ~/work/vpn.ovpn",
               "--type", "fact")
    manual = m3(machines, "laptop", "sync", "now")
    assert manual["conflicts"] == 0
    # The engine syncs once as it starts: that run may have pushed the note already, and this one the rest.
    laptop_runs = m3(machines, "laptop", "sync", "log", "--limit", "5")["runs"]
    pushed = sum(run["pushed"] for run in laptop_runs)
    assert pushed >= 2 and all(run["error"] is None for run in laptop_runs)
    m3(machines, "desktop", "sync", "now")  # its engine, started by this command, may have synced first
    found = m3(machines, "desktop", "memory", "search", "--query", "where is the VPN config")
    assert [item["id"] for item in found["items"]][:1] == [saved["id"]]
    status = m3(machines, "desktop", "sync", "status")
    assert status["configured"] and status["waiting"] == 0 and status["warehouse"]["nodes"] == 2
    log = m3(machines, "desktop", "sync", "log", "--limit", "5")
    assert log["runs"][0]["trigger"] == "manual" and {run["trigger"] for run in log["runs"]} <= {"manual", "schedule"}
    assert sum(run["pulled"] for run in log["runs"]) == pushed
    assert all(run["error"] is None for run in log["runs"])
