"""Ctrl-C on a waiting command: it stops at once with a JSON error and exit status 130 (SIGTERM: 143), never a
traceback."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

WAITING = "agent local waits for notifications"


def wait_until_waiting(child: subprocess.Popen[str], log: Path, within: float) -> None:
    """Poll (bounded) until the command's log says its wait is registered with the agent's router."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if log.exists() and WAITING in log.read_text(encoding="utf-8", errors="replace"):
            return
        assert child.poll() is None, child.communicate()
        time.sleep(0.05)
    pytest.fail(f"the command did not start waiting within {within} s")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_waiting_command_stops_at_once_on_a_signal_with_a_json_error_and_exit_128_plus_the_signal(
        m3_executable: str, child_env: dict[str, str], m3_home: Path, signum: signal.Signals) -> None:
    child = subprocess.Popen([m3_executable, "notifications", "wait", "--timeout", "20"], env=child_env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until_waiting(child, m3_home / "logs" / "m3.log", within=60)
        sent = time.monotonic()
        child.send_signal(signum)
        out, err = child.communicate(timeout=10)
        took = time.monotonic() - sent
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    assert child.returncode == 128 + signum, err  # 130 for SIGINT, 143 for SIGTERM
    assert took < 5, took
    assert out == ""
    assert "Traceback" not in err and "guest run" not in err and "Nursery" not in err, err
    error = json.loads(err.strip().splitlines()[-1])["error"]
    assert (error["code"], error["details"]["signal"]) == ("interrupted", signum.name)
