"""Start the store's engine on first use (one, however many front-ends race), stop it, replace an old one.

A front-end that finds no engine takes ``<key>.lock``, looks again (another may have started one meanwhile)
and otherwise spawns ``python -m m3.gateway.engine`` in its own session, detached from the terminal, stderr
into the engine's log. The engine writes one JSON line on an inherited pipe once it listens; the starter
waits for that line (bounded by ``engine.start_timeout_s``), never polling. Standard library only.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from typing import Any

from m3 import __version__
from m3.config import Config
from m3.errors import EngineSettingsMismatch, EngineUnavailable, EngineVersionMismatch, M3Error, all_error_classes
from m3.gateway.engine import client
from m3.gateway.engine.paths import (
    READY_FD_ENV,
    EnginePaths,
    engine_paths,
    file_lock,
    holder_alive,
    make_run_dir,
    settings_fingerprint,
)

_LOG_TAIL_BYTES = 2000


def ensure_engine(config: Config, paths: EnginePaths | None = None) -> dict[str, Any]:
    """The status of the store's engine of this version, started (or, when idle, restarted) if need be."""
    paths = paths or engine_paths(config)
    want = settings_fingerprint(config)
    found = client.status(paths.sock)
    if _fits(found, want):
        assert found is not None
        return found
    timeout: float = config["engine.start_timeout_s"]
    make_run_dir(paths.run_dir)
    with file_lock(paths.lock, timeout) as locked:
        if not locked:
            raise EngineUnavailable(f"another front-end has been starting the engine for over {timeout:g} s",
                                    details={"lock": str(paths.lock), "log": str(paths.log)})
        found = client.status(paths.sock)
        if found is not None and not _fits(found, want):
            replace_old(config, paths, found)
            found = None
        if found is None:
            found = _spawn(config, paths, timeout)
    return found


def _fits(found: dict[str, Any] | None, settings: str) -> bool:
    return found is not None and found.get("version") == __version__ and found.get("settings") == settings


def replace_old(config: Config, paths: EnginePaths, found: dict[str, Any]) -> None:
    """Stop an engine of another version or other settings when idle; refuse with a coded error when busy."""
    if found.get("inflight", 0) > 0 and found.get("version") == __version__:
        raise EngineSettingsMismatch(
            f"the engine of this store runs with other settings than this command's and is busy with "
            f"{found.get('inflight')} call(s)",
            details={"busy": found.get("inflight"), "pid": found.get("pid")})
    if found.get("inflight", 0) > 0:
        raise EngineVersionMismatch(
            f"the engine of this store runs m3 {found.get('version')}, this command is m3 {__version__}, and the "
            f"engine is busy with {found.get('inflight')} call(s)",
            details={"engine_version": found.get("version"), "frontend_version": __version__,
                     "busy": found.get("inflight"), "pid": found.get("pid")})
    stop_engine(config, paths)


def _spawn(config: Config, paths: EnginePaths, timeout: float) -> dict[str, Any]:
    make_run_dir(paths.logs_dir)
    read_fd, write_fd = os.pipe()
    env = {**engine_env(config), READY_FD_ENV: str(write_fd)}
    log_fd = os.open(paths.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        child = subprocess.Popen(
            [sys.executable, "-m", "m3.gateway.engine"], stdin=subprocess.DEVNULL, stdout=log_fd, stderr=log_fd,
            env=env, pass_fds=(write_fd,), start_new_session=True, cwd="/")
    finally:
        os.close(write_fd)
        os.close(log_fd)
    # Reap the engine when it exits while this front-end still runs (a long-lived MCP front-end, a test).
    threading.Thread(target=child.wait, daemon=True, name="m3-engine-reaper").start()
    try:
        line = _read_line(read_fd, timeout)
    finally:
        os.close(read_fd)
    answer: dict[str, Any] = {}
    if line:
        try:
            answer = json.loads(line)
        except ValueError:
            answer = {}
    if answer.get("ready"):
        found = client.status(paths.sock)
        if found is not None:
            return found
    if answer.get("error", {}).get("code") == "engine_running":
        found = client.status(paths.sock)
        if found is not None:
            return found
    error = answer.get("error") or {}
    details = {"log": str(paths.log), "log_tail": _tail(paths)}
    coded = {cls.code: cls for cls in all_error_classes()}.get(str(error.get("code")))
    if coded is not None and coded is not M3Error:  # the engine's own coded reason (a bad setting …)
        raise coded(str(error.get("message")), hint=error.get("hint"), details=details)
    message = error.get("message") or ("no answer" if line is None else "it exited")
    raise EngineUnavailable(f"the engine did not start: {message}", details=details)


def engine_env(config: Config) -> dict[str, str]:
    """This process's environment with ``config`` spelled out as ``M3_*`` variables: the engine runs with the
    settings of the front-end that starts it, whatever this process's own environment says."""
    from m3.config import SETTINGS

    env = {k: v for k, v in os.environ.items() if not k.startswith("M3_")}
    env["M3_HOME"] = str(config.home)
    for s in SETTINGS:
        if config.origin(s.key) == "default" and not s.key.startswith("paths."):
            continue
        value = config[s.key]
        env[s.env_var] = (",".join(value) if isinstance(value, list) else
                          ("true" if value else "false") if isinstance(value, bool) else str(value))
    env.update({"M3_PATHS_ENGINE": str(config.engine_root), "M3_PATHS_LOGS": str(config.logs_root),
                "M3_PATHS_RUN": str(config.run_root), "M3_STORE_URL": config.store_url})
    return env


def _read_line(fd: int, timeout: float) -> str | None:
    """One line from ``fd`` within ``timeout``; '' at end of file (the child died), None at the deadline."""
    deadline = time.monotonic() + timeout
    data = b""
    while b"\n" not in data:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            return None
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
    return data.decode("utf-8", "replace").split("\n", 1)[0]


def _tail(paths: EnginePaths) -> str:
    try:
        with paths.log.open("rb") as fh:
            fh.seek(max(0, fh.seek(0, os.SEEK_END) - _LOG_TAIL_BYTES))
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""


def stop_engine(config: Config, paths: EnginePaths | None = None, timeout: float | None = None) -> dict[str, Any]:
    """Ask the engine to stop and wait (bounded) until it has; SIGKILL it past the deadline."""
    paths = paths or engine_paths(config)
    limit = timeout if timeout is not None else config["embed.drain_timeout_s"] + 30.0
    pid = holder_alive(paths.pid)
    if pid is None:
        return {"stopped": False, "running": False}
    try:
        client.request(paths.sock, "POST", client.STOP_PATH, timeout=5.0)
    except (client.EngineDown, client.EngineLost, OSError):
        if pid > 0:  # alive but not answering: a signal instead
            _signal(pid, signal.SIGTERM)
    fd = os.open(paths.pid, os.O_RDONLY)
    try:
        from m3.gateway.engine.paths import wait_lock

        if not wait_lock(fd, limit):
            if pid > 0:
                _signal(pid, signal.SIGKILL)
            wait_lock(fd, 10.0)
    finally:
        os.close(fd)  # the lock, if had, goes with it
    return {"stopped": True, "pid": pid}


def _signal(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)


def engine_status(config: Config) -> dict[str, Any]:
    paths = engine_paths(config)
    found = client.status(paths.sock)
    if found is None:
        return {"running": False, "socket": str(paths.sock), "log": str(paths.log),
                "hint": "It starts on the first command, or with `m3 engine start`."}
    return {"running": True, **found}
