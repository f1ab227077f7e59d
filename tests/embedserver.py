"""Running ``m3 embedder serve`` as a real process for tests, and reading its counters."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2 as httpx

READY_S = 60.0
M3 = str(Path(sys.executable).with_name("m3"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class EmbedServer:
    """A started server: its process, base URL (``…/v1``) and everything it wrote to stderr."""

    process: subprocess.Popen[str]
    port: int
    stderr: list[str] = field(default_factory=list)
    reader: threading.Thread | None = None

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.root}/v1"

    def stats(self, key: str = "") -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        result: dict[str, Any] = httpx.get(f"{self.root}/stats", headers=headers, timeout=10).json()
        return result

    def kill(self) -> None:
        """SIGKILL: the server gets no chance to say goodbye."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)
        if self.reader is not None:
            self.reader.join(timeout=30)
        if self.process.stderr is not None:
            self.process.stderr.close()


def start_server(env: dict[str, str], *args: str, port: int | None = None) -> EmbedServer:
    """Start ``m3 embedder serve`` on a free port and wait (bounded) for its ready line on stderr."""
    port = port or free_port()
    process = subprocess.Popen([M3, "embedder", "serve", "--port", str(port), *args], env=env, text=True,
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    server = EmbedServer(process, port)
    ready = threading.Event()

    def read() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            server.stderr.append(line)
            if re.search(r"serving .* on http://", line):
                ready.set()
        ready.set()  # exited: stop waiting

    server.reader = threading.Thread(target=read, daemon=True)
    server.reader.start()
    if not ready.wait(READY_S) or process.poll() is not None:
        server.kill()
        raise RuntimeError("m3 embedder serve did not start:\n" + "".join(server.stderr))
    return server


@contextmanager
def running_server(env: dict[str, str], *args: str) -> Iterator[EmbedServer]:
    server = start_server(env, *args)
    try:
        yield server
    finally:
        server.kill()


def server_env(env: dict[str, str], **settings: str) -> dict[str, str]:
    """``env`` plus ``M3_<SETTING>`` variables, e.g. ``embed__url=…`` → ``M3_EMBED_URL``."""
    out = dict(env)
    out.update({"M3_" + name.upper().replace("__", "_"): value for name, value in settings.items()})
    out.setdefault("OPENBLAS_NUM_THREADS", os.environ.get("OPENBLAS_NUM_THREADS", "1"))
    return out
