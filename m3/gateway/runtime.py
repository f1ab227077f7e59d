"""Start and stop a complete m3 (configuration, actors, service) for one process."""

from __future__ import annotations

import logging
import logging.handlers
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from m3.config import Config, load_config

if TYPE_CHECKING:
    from m3.embed.base import Embedder
    from m3.gateway.service import Service


@contextmanager
def running(config: Config | None = None, *, embedder: Embedder | None = None,
            drain_embeddings: bool = True, background: bool = True) -> Iterator[Service]:
    """A started service; on exit, pending embeddings are finished (bounded) and actors stopped.

    ``background=False`` (one-shot commands): embed only the memories this process writes, and leave the
    store's backlog (memories lacking a vector, a change of model's re-embedding) to long-running
    processes instead of starting it for the few seconds this process lives.
    """
    # Imported here, not at module level: the CLI imports setup_logging for every command, and
    # `m3 --version`, usage errors and `m3 config` should not pay for SQLAlchemy and the actors.
    from m3.actors.system import ActorSystem
    from m3.gateway.registry import default_registry
    from m3.gateway.service import Service

    config = config or load_config()
    system = ActorSystem(config, embedder, background=background).start()
    try:
        yield Service(config, system, default_registry())
    finally:
        system.stop(drain_embeddings=drain_embeddings)


def setup_logging(config: Config, stderr_level: int = logging.WARNING) -> None:
    """Log to stderr (never stdout: it carries JSON or the MCP protocol) and to <logs>/m3.log."""
    root = logging.getLogger()
    if getattr(root, "_m3_configured", False):
        return
    root.setLevel(logging.DEBUG)
    fmt = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    err = logging.StreamHandler(sys.stderr)
    err.setLevel(stderr_level)
    err.setFormatter(fmt)
    root.addHandler(err)
    try:
        config.logs_root.mkdir(parents=True, exist_ok=True)
        fh = logging.handlers.RotatingFileHandler(config.logs_root / "m3.log", maxBytes=5_000_000, backupCount=3,
                                                  encoding="utf-8")
        fh.setLevel(logging.INFO)
        fh.setFormatter(fmt)
        root.addHandler(fh)
    except OSError as exc:
        root.warning("cannot write the log file under %s: %s", config.logs_root, exc)
    for noisy in ("alembic", "mcp", "httpx", "hypercorn.access"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    root._m3_configured = True  # type: ignore[attr-defined]
