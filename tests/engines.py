"""Stopping the engines a test started: every engine whose pid file lies in a run directory."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from m3.gateway.engine.paths import holder_alive, wait_lock


def stop_engines(run_dir: Path, timeout: float = 60.0) -> list[int]:
    """SIGTERM every live engine of ``run_dir`` and wait (bounded) until each has let go of its life lock."""
    stopped: list[int] = []
    if not run_dir.is_dir():
        return stopped
    for pid_file in sorted(run_dir.glob("*.pid")):
        pid = holder_alive(pid_file)
        if pid is None:
            continue
        if pid > 0:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
        fd = os.open(pid_file, os.O_RDONLY)
        try:
            if not wait_lock(fd, timeout) and pid > 0:
                os.kill(pid, signal.SIGKILL)
                wait_lock(fd, 10.0)
        finally:
            os.close(fd)
        stopped.append(pid)
    return stopped
