"""Opening the store: engines per actor (set up by the store's dialect module), migrations on open.

Each actor opens its own engine (``open_engine``), so no connection is ever
shared between threads. ``migrate`` brings the schema to the newest
revision and is safe to run from several processes at once.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from sqlalchemy import Engine, inspect, text
from sqlalchemy.exc import DBAPIError

from m3.errors import M3Error, StoreError
from m3.store.dialect import Dialect, dialect_for

log = logging.getLogger(__name__)

Role = Literal["writer", "reader"]
_migrate_lock = threading.Lock()


@dataclass(frozen=True)
class StoreOptions:
    """Connection settings taken from the configuration."""

    url: str
    sqlite_synchronous: str = "NORMAL"
    busy_timeout_ms: int = 10_000


def open_engine(options: StoreOptions, role: Role) -> Engine:
    """An engine for one actor, with its dialect's session settings (SQLite writers: ``BEGIN IMMEDIATE``)."""
    return dialect_for(options.url).engine(options, role)


def write_errors(n: int, exc: Exception, dialect: Dialect) -> list[M3Error]:
    """The coded error each of ``n`` callers of a failed write gets (an exception object is raised in one
    thread only), logged once: ``exc`` itself if it is one, else the dialect's StoreError."""
    first = _write_error(exc, dialect)
    return [first] + [type(first)(first.message, hint=first.hint, details=first.details) for _ in range(n - 1)]


def _write_error(exc: Exception, dialect: Dialect) -> M3Error:
    if isinstance(exc, M3Error):
        return exc
    log.error("write failed", exc_info=exc)
    known = dialect.store_error(exc)
    if known is not None:
        return known
    # The driver's own message, without SQLAlchemy's statement dump (it can hold user content).
    reason = getattr(exc, "orig", None) or exc
    return StoreError(f"the write failed: {type(reason).__name__}: {reason}")


def migrate_store(options: StoreOptions) -> tuple[str, str]:
    """Open a writer engine for ``options``, :func:`migrate`, close it; the revisions before and after."""
    engine = open_engine(options, "writer")
    try:
        return current_revision(engine), migrate(engine)
    finally:
        engine.dispose()


def migrate(engine: Engine) -> str:
    """Apply every pending migration; return the schema revision now in place."""
    from m3.store.migrations import HEAD

    if current_revision(engine) == HEAD:
        return HEAD
    from alembic import command
    from alembic.config import Config as AlembicConfig

    cfg = AlembicConfig()
    cfg.set_main_option("script_location", str(Path(__file__).parent / "migrations"))
    with _migrate_lock:
        try:
            with engine.begin() as conn:
                dialect_for(conn).lock_migrations(conn)
                cfg.attributes["connection"] = conn
                command.upgrade(cfg, "head")
        except DBAPIError as exc:
            raise StoreError(f"cannot migrate the store: {str(exc.orig).strip()}",
                             hint=dialect_for(engine).migration_hint) from exc
    return current_revision(engine)


def current_revision(engine: Engine) -> str:
    """The schema revision in place, "" before the first migration; a StoreError if the store cannot be reached."""
    try:
        with engine.connect() as conn:
            if not inspect(conn).has_table("alembic_version"):
                return ""
            row = conn.execute(text("SELECT version_num FROM alembic_version")).first()
    except DBAPIError as exc:
        # The driver's message names the host or file, never the password.
        raise StoreError(f"cannot open the store: {type(exc.orig).__name__}: {str(exc.orig).strip()}",
                         hint="Check store.url (`m3 config show --origin`); for the embedded PostgreSQL, "
                              "`m3 postgres status`.") from exc
    return str(row[0]) if row else ""
