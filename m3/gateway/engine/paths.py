"""Where one store's engine lives: files in the run directory keyed by the store, and its log.

``<run>/<key>.sock`` (the Unix socket, 0600), ``<run>/<key>.lock`` (held while an engine is being started, so
two front-ends starting at once make one engine), ``<run>/<key>.pid`` (holds the pid, flock-ed by the engine
for as long as it lives), ``<logs>/engine-<key>.log``. ``key`` is the first 16 hex digits of the SHA-256 of
the store URL. Standard library only: the quick CLI path imports this.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from m3 import __version__
from m3.config import Config
from m3.errors import ConfigError

#: The pipe on which a starting engine announces itself (one JSON line).
READY_FD_ENV = "M3_ENGINE_READY_FD"
#: AF_UNIX paths longer than this (108 bytes on Linux, less elsewhere) are reached through the folder's fd.
_MAX_SUN_PATH = 100


MODES = ("engine", "embedded")


def engine_mode(config: Config) -> str:
    """``engine.mode``: ``engine`` (front-ends relay to the store's engine) or ``embedded`` (actors in process)."""
    mode = str(config["engine.mode"])
    if mode not in MODES:
        raise ConfigError(f"engine.mode must be engine or embedded, not {mode!r}",
                          hint="Run `m3 config set engine.mode engine` (or embedded).")
    return mode


#: Settings that are a front-end's own (who it speaks for, how it finds and serves the engine): they may differ
#: between front-ends of one engine. Every other setting is the engine's.
_FRONT_END_SETTINGS = ("identity.", "engine.", "serve.", "dashboard.", "paths.")


def settings_fingerprint(config: Config) -> str:
    """A digest of the settings the engine runs with; a front-end with other ones gets a fresh engine."""
    from m3.config import SETTINGS

    values = {s.key: config[s.key] for s in SETTINGS if not s.key.startswith(_FRONT_END_SETTINGS)}
    values.update({"store.url": config.store_url, "paths.engine": str(config.engine_root),
                   "paths.logs": str(config.logs_root)})
    text = repr(sorted(values.items()))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class EnginePaths:
    run_dir: Path
    key: str
    logs_dir: Path

    @property
    def sock(self) -> Path:
        return self.run_dir / f"{self.key}.sock"

    @property
    def lock(self) -> Path:
        return self.run_dir / f"{self.key}.lock"

    @property
    def pid(self) -> Path:
        return self.run_dir / f"{self.key}.pid"

    @property
    def log(self) -> Path:
        return self.logs_dir / f"engine-{self.key}.log"

    @property
    def manifest(self) -> Path:
        return self.run_dir / f"tools-{__version__}.json"


def store_key(url: str) -> str:
    return hashlib.sha256(url.encode("utf-8")).hexdigest()[:16]


def engine_paths(config: Config) -> EnginePaths:
    return EnginePaths(run_dir=config.run_root, key=store_key(config.store_url), logs_dir=config.logs_root)


def make_run_dir(path: Path) -> None:
    """The run directory, created 0700 (and tightened to 0700 when it is open to others)."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    if path.stat().st_mode & 0o077:
        os.chmod(path, 0o700)


@contextmanager
def _addressable(path: Path) -> Iterator[str]:
    """A name ``bind``/``connect`` accept for ``path``: itself, or when too long ``/proc/self/fd/N/<name>``."""
    if len(os.fsencode(path)) <= _MAX_SUN_PATH:
        yield str(path)
        return
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{fd}/{path.name}"
    finally:
        os.close(fd)


def connect(path: Path, timeout: float | None) -> socket.socket:
    """A connected AF_UNIX stream socket; ``FileNotFoundError``/``ConnectionRefusedError`` when nobody listens."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        with _addressable(path) as name:
            sock.connect(name)
    except BaseException:
        sock.close()
        raise
    return sock


def bind(path: Path) -> socket.socket:
    """A listening AF_UNIX socket at ``path``, mode 0600 from the start (a stale file is replaced)."""
    path.unlink(missing_ok=True)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        with _addressable(path) as name:
            sock.bind(name)
    finally:
        os.umask(old)
    os.chmod(path, 0o600)
    sock.listen(128)
    return sock


@contextmanager
def file_lock(path: Path, timeout: float) -> Iterator[bool]:
    """Hold an exclusive ``flock`` on ``path`` (created 0600); yields False when it was not had within ``timeout``."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        got = wait_lock(fd, timeout)
        try:
            yield got
        finally:
            if got:
                fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def wait_lock(fd: int, timeout: float) -> bool:
    """``flock(fd, LOCK_EX)`` within ``timeout`` seconds (a blocked flock in a helper thread, never polling)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        pass
    if timeout <= 0:
        return False
    done = threading.Event()
    guard = threading.Lock()
    state = {"abandoned": False, "got": False}
    waiter_fd = os.dup(fd)  # the same open file description: a lock taken through it is fd's

    def take() -> None:
        got = False
        try:
            fcntl.flock(waiter_fd, fcntl.LOCK_EX)
            got = True
        except OSError:
            pass
        with guard:
            if state["abandoned"]:  # the caller gave up: release what came too late
                if got:
                    fcntl.flock(waiter_fd, fcntl.LOCK_UN)
                os.close(waiter_fd)
                return
            state["got"] = got
            done.set()

    threading.Thread(target=take, daemon=True, name="m3-flock").start()
    done.wait(timeout)
    with guard:
        if done.is_set():
            os.close(waiter_fd)
            return state["got"]
        state["abandoned"] = True
    return False


def holder_alive(pid_path: Path) -> int | None:
    """The pid of the engine holding ``pid_path``'s lock, or None when no engine holds it."""
    try:
        fd = os.open(pid_path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            text = os.read(fd, 64).decode("ascii", "replace").strip()
            return int(text) if text.isdigit() else -1
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)
