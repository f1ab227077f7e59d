"""``m3 wheelhouse build DIR`` and the install from it with ``pip install --no-index``.

NETWORK: building a wheelhouse asks the package index (pip's cache first) for what it does not have: the
quick test (run by default) only for setuptools, to build m3's own wheel; the full test for every
dependency (a few hundred MB), so it runs only with ``M3_TEST_WHEELHOUSE=1`` (README.md, "Tests"). The
install itself runs with ``--no-index``, no find-links but the wheelhouse and no pip configuration, so it
cannot reach the network.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from tests.gateway.conftest import REPO_ROOT

FULL = os.environ.get("M3_TEST_WHEELHOUSE") == "1"


def _m3(*argv: str) -> dict[str, object]:
    # Through this checkout's m3, as a user would run it; pip's progress goes to stderr.
    done = subprocess.run([sys.executable, "-m", "m3", *argv], capture_output=True, text=True, timeout=1800,
                          check=False, cwd=REPO_ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    answer: dict[str, object] = json.loads(done.stdout)
    return answer


def _offline_install(wheelhouse: Path, target: Path, *extra: str) -> Path:
    """A fresh venv with m3 installed from ``wheelhouse`` only; its python."""
    venv.create(target, with_pip=True)
    python = target / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "M3_", "PYTHON"))}
    env["PIP_CONFIG_FILE"] = os.devnull  # no index or find-links from any pip configuration
    done = subprocess.run([str(python), "-m", "pip", "install", "--no-index", "--find-links", str(wheelhouse),
                           *extra, "m3-memory"], capture_output=True, text=True, timeout=1800, check=False, env=env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return python


@pytest.mark.slow
def test_the_m3_wheel_builds_into_a_wheelhouse_and_installs_from_it_without_an_index(tmp_path: Path) -> None:
    built = _m3("wheelhouse", "build", str(tmp_path / "wh"), "--no-deps")
    assert (built["wheels"], built["dependencies"]) == (1, False)
    assert str(built["m3_wheel"]).startswith("m3_memory-")
    python = _offline_install(tmp_path / "wh", tmp_path / "venv", "--no-deps")
    version = subprocess.run([str(python), "-c", "import importlib.metadata as m; print(m.version('m3-memory'))"],
                             capture_output=True, text=True, timeout=60, check=True, cwd=tmp_path)
    from m3 import __version__

    assert version.stdout.strip() == __version__


@pytest.mark.slow
@pytest.mark.skipif(not FULL, reason="downloads every dependency (a few hundred MB): set M3_TEST_WHEELHOUSE=1")
def test_a_full_wheelhouse_installs_a_working_m3_with_no_network(tmp_path: Path) -> None:
    built = _m3("wheelhouse", "build", str(tmp_path / "wh"))
    assert int(str(built["wheels"])) > 10
    python = _offline_install(tmp_path / "wh", tmp_path / "venv")
    m3 = python.with_name("m3")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("M3_", "PYTHON"))}
    env["M3_HOME"] = str(tmp_path / "home")
    written = subprocess.run([str(m3), "memory", "memory_write", "--content", "installed offline"],
                             capture_output=True, text=True, timeout=300, check=True, env=env, cwd=tmp_path)
    assert json.loads(written.stdout)["created"] is True
