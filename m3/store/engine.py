"""Opening the store: engines per actor, SQLite pragmas, migrations on open.

Each actor opens its own engine (``open_engine``), so no connection is ever
shared between threads. ``migrate`` brings the schema to the newest
revision and is safe to run from several processes at once.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from sqlalchemy import URL, Connection, Engine, create_engine, event, inspect, make_url, text
from sqlalchemy.exc import ArgumentError, DBAPIError
from sqlalchemy.pool import NullPool

from m3.errors import ConfigError, M3Error, StoreError

log = logging.getLogger(__name__)

Role = Literal["writer", "reader"]
_migrate_lock = threading.Lock()


@dataclass(frozen=True)
class StoreOptions:
    """Connection settings taken from the configuration."""

    url: str
    sqlite_synchronous: str = "NORMAL"
    busy_timeout_ms: int = 10_000


def parse_url(url: str) -> URL:
    """The store URL parsed; a ConfigError (which never repeats the URL: it may hold a password) if malformed."""
    try:
        return make_url(url)
    except ArgumentError:
        raise ConfigError("store.url is not a valid database URL",
                          hint="Use sqlite:///<path> or postgresql+psycopg://user@host/db "
                               "(see docs/postgres.md).") from None


def dialect_of(url: str) -> str:
    return parse_url(url).get_backend_name()


def open_engine(options: StoreOptions, role: Role) -> Engine:
    """An engine for one actor. Writers on SQLite begin with ``BEGIN IMMEDIATE``."""
    url = parse_url(options.url)
    backend = url.get_backend_name()
    if backend == "sqlite":
        return _sqlite_engine(options, role)
    if backend == "postgresql":
        from m3.store.postgres import postgres_engine

        return postgres_engine(options.url, role, options.busy_timeout_ms)
    raise ConfigError(f"unsupported store backend {backend!r}", hint="Use a sqlite:/// or postgresql+psycopg:// URL.")


class OwnedConnection:
    """The one engine and connection an actor owns: opened when it starts, closed when it stops.

    Not thread-safe, on purpose: only the owning actor's thread touches it.
    """

    def __init__(self, options: StoreOptions, role: Role) -> None:
        self._options = options
        self._role: Role = role
        self._engine: Engine | None = None
        self._conn: Connection | None = None

    def open(self) -> Connection:
        """Open the engine and its connection (once) and return the connection."""
        if self._conn is None:
            self._engine = open_engine(self._options, self._role)
            self._conn = self._engine.connect()
        return self._conn

    def close(self) -> None:
        """Close the connection and dispose of the engine; safe to call when not open."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None

    @property
    def conn(self) -> Connection:
        """The open connection; fails loudly if the actor is not running."""
        assert self._conn is not None, "the actor is not running"
        return self._conn


def _enable_wal(cur: Any, busy_timeout_ms: int) -> None:
    """Put the database in WAL mode (a no-op once it is).

    Switching a brand-new file to WAL needs an exclusive lock, and SQLite reports "database is locked" at once
    there instead of calling its busy handler, so two processes creating one store together could fail. The
    lock is another process's, with nothing to wait on but time: retry with backoff within the busy timeout.
    """
    if str(cur.execute("PRAGMA journal_mode").fetchone()[0]).lower() == "wal":
        return
    deadline = time.monotonic() + busy_timeout_ms / 1000
    delay = 0.005
    while True:
        try:
            cur.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() + delay > deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.2)


def _sqlite_engine(options: StoreOptions, role: Role) -> Engine:
    url = make_url(options.url)
    if url.database and url.database != ":memory:":
        Path(url.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
    synchronous = options.sqlite_synchronous.upper()
    if synchronous not in {"OFF", "NORMAL", "FULL", "EXTRA"}:
        raise ConfigError(f"store.sqlite_synchronous must be NORMAL or FULL, not {synchronous!r}")
    # NullPool: the actor keeps its one connection open itself; no pool thread-affinity surprises.
    engine = create_engine(url, poolclass=NullPool, connect_args={"check_same_thread": False})
    begin = "BEGIN IMMEDIATE" if role == "writer" else "BEGIN"

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Let SQLAlchemy's "begin" event issue BEGIN, so writers can take the lock up front.
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout = {int(options.busy_timeout_ms)}")
        _enable_wal(cur, options.busy_timeout_ms)
        cur.execute(f"PRAGMA synchronous = {synchronous}")
        cur.execute("PRAGMA foreign_keys = ON")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        conn.exec_driver_sql(begin)

    return engine


def migrate(engine: Engine) -> str:
    """Apply every pending migration; return the schema revision now in place."""
    from m3.store.migrations import HEAD

    try:
        if current_revision(engine) == HEAD:
            return HEAD
    except DBAPIError as exc:
        raise unreachable_error(exc) from exc
    from alembic import command
    from alembic.config import Config as AlembicConfig

    cfg = AlembicConfig()
    cfg.set_main_option("script_location", str(Path(__file__).parent / "migrations"))
    with _migrate_lock:
        try:
            with engine.begin() as conn:
                if conn.dialect.name == "postgresql":
                    # Serialise concurrent first starts of several processes on one database.
                    conn.execute(text("SELECT pg_advisory_xact_lock(7283711)"))
                cfg.attributes["connection"] = conn
                command.upgrade(cfg, "head")
        except DBAPIError as exc:
            hint = ("On PostgreSQL the pgvector extension must be installed on the server, and m3's role must "
                    "be allowed to create it or find it created (docs/postgres.md)."
                    if engine.dialect.name == "postgresql" else None)
            raise StoreError(f"cannot migrate the store: {str(exc.orig).strip()}", hint=hint) from exc
    return current_revision(engine)


def unreachable_error(exc: DBAPIError) -> StoreError:
    # The driver's message names the host or file, never the password.
    return StoreError(f"cannot open the store: {type(exc.orig).__name__}: {str(exc.orig).strip()}",
                      hint="Check store.url (`m3 config show --origin`); for the embedded PostgreSQL, "
                           "`m3 postgres status`.")


def write_errors(n: int, exc: Exception) -> list[M3Error]:
    """The coded error each of ``n`` callers of a failed write gets (an exception object is raised in one
    thread only), logged once: ``exc`` itself if it is one, else a StoreError."""
    first = _write_error(exc)
    return [first] + [type(first)(first.message, hint=first.hint, details=first.details) for _ in range(n - 1)]


def _write_error(exc: Exception) -> M3Error:
    if isinstance(exc, M3Error):
        return exc
    log.error("write failed", exc_info=exc)
    from m3.store.postgres import store_error

    known = store_error(exc)
    if known is not None:
        return known
    # The driver's own message, without SQLAlchemy's statement dump (it can hold user content).
    reason = getattr(exc, "orig", None) or exc
    return StoreError(f"the write failed: {type(reason).__name__}: {reason}")


def current_revision(engine: Engine) -> str:
    with engine.connect() as conn:
        if not inspect(conn).has_table("alembic_version"):
            return ""
        row = conn.execute(text("SELECT version_num FROM alembic_version")).first()
    return str(row[0]) if row else ""
