"""Opening the store: settings on every connection the actors hold, the writer's lock, read snapshots."""

from __future__ import annotations

import sqlite3
from typing import Any

import numpy as np
import pytest
from sqlalchemy import Connection, Engine, text

from m3.actors.base import ActorStats
from m3.actors.reader import ConnectionOwner
from m3.actors.supervisor import ActorHandle
from m3.actors.system import ActorSystem
from m3.errors import ConfigError
from m3.protocols.messages.memory import Flush
from m3.store.engine import StoreOptions, open_engine
from tests.stored import is_postgres, sqlite_path


def pragmas(conn: Connection) -> dict[str, Any]:
    # Through the DB-API connection: reading a pragma there opens no SQLAlchemy transaction on the actor's connection.
    raw = conn.connection.driver_connection
    assert raw is not None
    return {name: raw.execute(f"PRAGMA {name}").fetchone()[0]
            for name in ("journal_mode", "synchronous", "busy_timeout", "foreign_keys")}


def pg_settings(conn: Connection) -> dict[str, Any]:
    """The session settings m3 sets, and whether numpy vectors bind as pgvector values (read on the DB-API level)."""
    raw = conn.connection.driver_connection
    assert raw is not None
    try:
        found: dict[str, Any] = {name: raw.execute(f"SHOW {name}").fetchone()[0]
                                 for name in ("TimeZone", "hnsw.iterative_scan", "lock_timeout")}
        found["vector_binds"] = raw.execute("SELECT vector_dims(%s)", [np.ones(3, dtype=np.float32)]).fetchone()[0]
    finally:
        raw.rollback()  # leave the actor's connection idle, as it was
    return found


EXPECTED = {"journal_mode": "wal", "synchronous": 1, "busy_timeout": 10_000, "foreign_keys": 1}
PG_EXPECTED = {"TimeZone": "UTC", "hnsw.iterative_scan": "strict_order", "vector_binds": 3}
#: Writers wait store.busy_timeout_ms for another connection's lock; readers never take one that could wait.
PG_LOCK_TIMEOUT = {"writer": "10s", "searcher": "0", "embedder": "0"}


def actor_connection(handle: ActorHandle) -> Connection:
    """The connection an actor opened for itself (read while the actor is idle)."""
    handle.ask(Flush(), timeout=30)
    ref = handle._ref
    assert ref is not None
    actor: Any = ref._actor_weakref()
    conn: Connection = actor.conn
    return conn


@pytest.mark.parametrize("actor", ["writer", "searcher", "embedder"])
def test_every_actor_connection_gets_the_store_settings(system: ActorSystem, store_url: str, actor: str) -> None:
    conn = actor_connection(getattr(system, actor))
    if is_postgres(store_url):
        assert pg_settings(conn) == {**PG_EXPECTED, "lock_timeout": PG_LOCK_TIMEOUT[actor]}
    else:  # WAL with synchronous=NORMAL, a busy timeout and foreign keys on
        assert pragmas(conn) == EXPECTED


@pytest.mark.parametrize("role", ["writer", "reader"])
def test_both_roles_get_the_configured_synchronous_and_busy_timeout(store_url: str, role: Any) -> None:
    engine = open_engine(StoreOptions(url=store_url, sqlite_synchronous="full", busy_timeout_ms=1234), role)
    try:
        with engine.connect() as conn:
            if is_postgres(store_url):  # synchronous is the server's business there; the timeout is lock_timeout
                assert pg_settings(conn) == {**PG_EXPECTED, "lock_timeout": "1234ms" if role == "writer" else "0"}
            else:
                assert pragmas(conn) == {**EXPECTED, "synchronous": 2, "busy_timeout": 1234}
    finally:
        engine.dispose()


@pytest.mark.store_only("sqlite", reason="sqlite_synchronous is a SQLite pragma; a PostgreSQL server sets its own "
                                         "durability")
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


@pytest.mark.store_only("sqlite", reason="SQLite has one write lock per file, taken at BEGIN IMMEDIATE; PostgreSQL "
                                         "writers lock only the rows they change, so several write at once")
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


@pytest.mark.store_only("postgres", reason="isolation levels are PostgreSQL's; a SQLite read transaction is always "
                                           "one snapshot")
def test_a_reader_sees_one_snapshot_per_transaction_and_a_writer_sees_each_commit(store_url: str) -> None:
    writer = open_engine(StoreOptions(url=store_url), "writer")
    reader = open_engine(StoreOptions(url=store_url), "reader")
    other = open_engine(StoreOptions(url=store_url), "writer")

    def chat_rows(conn: Connection) -> int:
        return int(conn.execute(text("SELECT count(*) FROM chatlog")).scalar_one())

    def append() -> None:
        with other.begin() as conn:
            conn.execute(text("INSERT INTO chatlog (id, conversation_id, role, content, turn, at, recorded_at) "
                              "VALUES (gen_random_uuid()::text, 'c', 'user', 'x', 0, now(), now())"))

    try:
        with reader.connect() as r, writer.connect() as w, r.begin(), w.begin():
            seen = (chat_rows(r), chat_rows(w))
            append()
            assert (chat_rows(r), chat_rows(w)) == (seen[0], seen[1] + 1)
        with reader.connect() as r, r.begin():
            assert chat_rows(r) == seen[0] + 1
    finally:
        for engine in (writer, reader, other):
            engine.dispose()


def test_a_connection_owner_opens_on_setup_releases_safely_and_refuses_use_when_closed(store_url: str) -> None:
    owner = ConnectionOwner(StoreOptions(url=store_url), stats=ActorStats(), on_crash=lambda _drain: None)
    owner.setup()
    conn = owner.conn
    assert conn.execute(text("SELECT 1")).scalar() == 1
    owner.release()
    owner.release()  # twice is fine: actors release on every stop path
    assert conn.closed
    with pytest.raises(AssertionError, match="not running"):
        _ = owner.conn
