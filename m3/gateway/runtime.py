"""Start and stop a complete m3 (configuration, actors, service) for one process."""

from __future__ import annotations

import gc
import logging
import logging.handlers
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from m3.config import Config, load_config
from m3.store.files import FILE_MODE, log_tightened, private_dir, private_file

if TYPE_CHECKING:
    from m3.gateway.service import Service


@contextmanager
def running(config: Config | None = None, *, drain_embeddings: bool = True, background: bool = True,
            long_lived: bool = False) -> Iterator[Service]:
    """A started service; on exit, pending embeddings are finished (bounded) and actors stopped.

    ``background=False`` (one-shot commands): embed only the memories this process writes, and leave the
    store's backlog (memories lacking a vector, a change of model's re-embedding) to long-running
    processes instead of starting it for the few seconds this process lives. ``long_lived``: this is one of
    m3's own serving processes (the engine, ``m3 serve``, the stdio server, the dashboard), so its heap is
    settled once started (:func:`settle_heap`); never in an application that embeds m3, whose heap is its own.
    """
    # Imported here, not at module level: the CLI imports setup_logging for every command, and
    # `m3 --version`, usage errors and `m3 config` should not pay for SQLAlchemy and the actors.
    from m3.actors.system import ActorSystem
    from m3.gateway.registry import default_registry
    from m3.gateway.service import Service

    config = config or load_config()
    log_tightened(private_roots(config, config.engine_root))
    system = ActorSystem(config, background=background).start()
    if long_lived:
        system.warm_queries()
        settle_heap()
    try:
        yield Service(config, system, default_registry())
    finally:
        system.stop(drain_embeddings=drain_embeddings)


def settle_heap() -> None:
    """Move every object alive now out of the cyclic garbage collector's sight (``gc.freeze``), after one last
    collection.

    Called once a long-lived process has started: what exists then (modules, the model's session, the actors)
    lives as long as the process. A full collection walks every tracked object and stops every thread while
    it does, about 75 ms with a 100k-memory store open and nearly nothing once the start-up heap is frozen;
    under 64 concurrent writers such pauses were the slowest writes (docs/benchmarks.md, "Garbage collector
    pauses"). Objects made later are collected as before; a frozen object is still freed when its last
    reference goes.
    """
    gc.collect()
    gc.freeze()


def private_roots(config: Config, root: Path) -> list[str]:
    """Make ``root`` (and ``M3_HOME`` when it holds it) private: created 0700, tightened if open to others."""
    changes = private_dir(config.home) if root.is_relative_to(config.home) else []
    return changes + private_dir(root)


class _PrivateLogFile(logging.handlers.RotatingFileHandler):
    """A rotating log whose every file, the ones rotation starts included, is created 0600."""

    def _open(self) -> Any:
        fd = os.open(self.baseFilename, os.O_WRONLY | os.O_APPEND | os.O_CREAT, FILE_MODE)
        return open(fd, self.mode, encoding=self.encoding, errors=self.errors)


def setup_logging(config: Config) -> None:
    """Log to stderr (never stdout: it carries JSON or the MCP protocol) and to <logs>/m3.log."""
    root = logging.getLogger()
    if getattr(root, "_m3_configured", False):
        return
    root.setLevel(logging.DEBUG)
    fmt = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    err = logging.StreamHandler(sys.stderr)
    err.setLevel(logging.WARNING)
    err.setFormatter(fmt)
    root.addHandler(err)
    try:
        tightened = private_roots(config, config.logs_root)
        tightened += private_file(config.logs_root / "m3.log")
        fh = _PrivateLogFile(config.logs_root / "m3.log", maxBytes=5_000_000, backupCount=3, encoding="utf-8")
        fh.setLevel(logging.INFO)
        fh.setFormatter(fmt)
        root.addHandler(fh)
        log_tightened(tightened)  # now that the log file can hold the lines
    except OSError as exc:
        root.warning("cannot write the log file under %s: %s", config.logs_root, exc)
    for noisy in ("alembic", "mcp", "httpx", "hypercorn.access"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    root._m3_configured = True  # type: ignore[attr-defined]
