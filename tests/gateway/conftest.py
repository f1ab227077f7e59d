"""Fixtures for the gateway surfaces: the trio backend, the m3 executable, a child's environment.

Async tests run on trio (the anyio pytest plugin with ``anyio_backend``)
because the gateway's actor bridge wakes trio tasks. Subprocesses run the
code of this checkout: ``PYTHONPATH`` points at the repository root, so an
installed copy elsewhere cannot answer in its place.
"""

from __future__ import annotations

import io
import logging
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# A Writer alone (no Embedder), to prepare a store with a backlog: the actor tests' fixtures, shared.
from tests.actors.conftest import start_writer, store_options  # noqa: F401
from tests.gateway.outcomes import Outcome, Run

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def anyio_backend() -> str:
    return "trio"


@pytest.fixture(scope="session")
def m3_executable() -> str:
    """The ``m3`` console script of the running interpreter (not a version-manager shim, which is slower)."""
    beside = Path(sys.executable).with_name("m3")
    found = str(beside) if beside.exists() else shutil.which("m3")
    if found is None:
        pytest.fail("the m3 console script is not installed; run `pip install -e .`")
    return found


@pytest.fixture
def child_env(env: dict[str, str]) -> dict[str, str]:
    """The ``env`` fixture plus ``PYTHONPATH`` at this checkout, for m3 subprocesses."""
    return {**env, "PYTHONPATH": str(REPO_ROOT)}


@pytest.fixture
def isolated_logging() -> Iterator[None]:
    """Undo what ``m3.gateway.cli.main`` does to the root logger when run in-process.

    main() installs a stderr handler (bound to pytest's capture stream) and a
    log file under the temporary home, once per process; without this the
    next test would log into a closed capture stream.
    """
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in root.handlers:
        if handler not in handlers:
            root.removeHandler(handler)
            handler.close()
    root.setLevel(level)
    if hasattr(root, "_m3_configured"):
        del root._m3_configured


@pytest.fixture
def m3(m3_executable: str, child_env: dict[str, str]) -> Run:
    """Run ``m3 …`` as a subprocess under the test's home and store (``stdin`` is fed to it)."""
    def run(*argv: str, stdin: str | None = None) -> Outcome:
        done = subprocess.run([m3_executable, *argv], env=child_env, input=stdin, capture_output=True, text=True,
                              timeout=120, check=False)
        return Outcome(done.returncode, done.stdout, done.stderr)
    return run


@pytest.fixture
def cli(m3_home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        isolated_logging: None) -> Run:
    """``m3 …`` in this process (``main(argv)``) under the temporary home; ``stdin`` feeds its standard input.
    A test module may define its own ``cli`` (test_cli.py does)."""
    from m3.gateway.cli import main

    def run(*argv: str, stdin: str = "") -> Outcome:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
        capsys.readouterr()
        status = main(list(argv))
        out, err = capsys.readouterr()
        return Outcome(status, out, err)
    return run
