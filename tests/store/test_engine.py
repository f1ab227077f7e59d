"""Opening the store: pragmas on every connection the actors hold, and the writer's up-front lock."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest
from sqlalchemy import Connection, Engine, text

from m3.actors.supervisor import ActorHandle
from m3.actors.system import ActorSystem
from m3.errors import ConfigError
from m3.protocols.messages import Flush
from m3.store.engine import StoreOptions, open_engine
from tests.stored import sqlite_path


def pragmas(conn: Connection) -> dict[str, Any]:
    # Through the DB-API connection: reading a pragma there opens no SQLAlchemy transaction on the actor's connection.
    raw = conn.connection.driver_connection
    assert raw is not None
    return {name: raw.execute(f"PRAGMA {name}").fetchone()[0]
            for name in ("journal_mode", "synchronous", "busy_timeout", "foreign_keys")}


EXPECTED = {"journal_mode": "wal", "synchronous": 1, "busy_timeout": 10_000, "foreign_keys": 1}


def actor_connection(handle: ActorHandle) -> Connection:
    """The connection an actor opened for itself (read while the actor is idle)."""
    handle.ask(Flush(), timeout=30)
    ref = handle._ref
    assert ref is not None
    actor: Any = ref._actor_weakref()
    conn: Connection = actor._conn
    return conn


@pytest.mark.parametrize("actor", ["writer", "searcher", "embedder"])
def test_every_actor_connection_runs_wal_normal_with_busy_timeout_and_foreign_keys(
        system: ActorSystem, actor: str) -> None:
    assert pragmas(actor_connection(getattr(system, actor))) == EXPECTED


@pytest.mark.parametrize("role", ["writer", "reader"])
def test_both_roles_get_the_configured_synchronous_and_busy_timeout(store_url: str, role: Any) -> None:
    engine = open_engine(StoreOptions(url=store_url, sqlite_synchronous="full", busy_timeout_ms=1234), role)
    try:
        with engine.connect() as conn:
            assert pragmas(conn) == {**EXPECTED, "synchronous": 2, "busy_timeout": 1234}
    finally:
        engine.dispose()


def test_an_unknown_synchronous_mode_is_a_config_error(store_url: str) -> None:
    with pytest.raises(ConfigError):
        open_engine(StoreOptions(url=store_url, sqlite_synchronous="SOMETIMES"), "writer")


def _holds_write_lock(engine: Engine, url: str) -> bool:
    with engine.connect() as conn:
        conn.begin()  # no statement yet: only BEGIN IMMEDIATE takes the lock here
        other = sqlite3.connect(sqlite_path(url), timeout=0, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")
            other.execute("ROLLBACK")
            return False
        except sqlite3.OperationalError as exc:
            assert "locked" in str(exc)
            return True
        finally:
            other.close()
            conn.rollback()


def test_a_writer_transaction_takes_the_write_lock_at_begin_and_a_reader_does_not(store_url: str) -> None:
    writer = open_engine(StoreOptions(url=store_url), "writer")
    reader = open_engine(StoreOptions(url=store_url), "reader")
    try:
        with writer.begin() as conn:
            conn.execute(text("CREATE TABLE t (x INTEGER)"))
        assert _holds_write_lock(writer, store_url)
        assert not _holds_write_lock(reader, store_url)
    finally:
        writer.dispose()
        reader.dispose()
