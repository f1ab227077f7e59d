"""SQLite's Dialect: WAL and pragmas, ``BEGIN IMMEDIATE`` writers (so write transactions of every process run
one at a time), FTS5 keyword statements, times as fixed-width text (string order is time order), BLOB vectors.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import (
    Column,
    ColumnElement,
    Connection,
    Engine,
    LargeBinary,
    Select,
    String,
    TextClause,
    bindparam,
    create_engine,
    event,
    func,
    text,
)
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.pool import NullPool
from sqlalchemy.sql.selectable import Join
from sqlalchemy.types import TypeEngine

from m3.errors import ConfigError, StoreError
from m3.store import fulltext
from m3.store.dialect import Dialect, Fact, parse_url
from m3.store.direct import driver_errors
from m3.store.files import log_tightened, private_dir, private_file

if TYPE_CHECKING:
    from m3.store.engine import Role, StoreOptions

#: Unfiltered searches check the filters on FTS5's best ``PREFILTER_FACTOR * limit`` matches first.
PREFILTER_FACTOR = 4
#: What to do when an erasure committed but its scrub could not finish.
SCRUB_HINT = ("Another m3 process kept a transaction open on the store: call gdpr_forget again once it is done or "
              "stopped (it finds nothing left to erase and scrubs the files).")
#: How much of the database file a reading connection maps into memory (address space, not resident memory).
READ_MMAP_BYTES = 1 << 30
#: The FTS5 tables kept by triggers (migration 0001).
FTS_TABLES = ("memories_fts", "chatlog_fts")
_FTS5_SCORE = "bm25(memories_fts, 0.0, 1.0)"  # title weight 0: the title is searched, not scored


class SqliteDialect(Dialect):
    """The :class:`m3.store.dialect.Dialect` of SQLite; it has no status of its own, and no failure it explains.

    It keeps the defaults of migrations and retries: a migration's write transaction already holds the database's
    one write lock, and with one writer at a time a transaction never loses a race, it waits (busy_timeout).
    """

    nearest_in_sql = False
    serial_writes = True
    syncs = True
    migration_hint: str | None = None
    time_type: TypeEngine[Any] = String(26)

    def engine(self, options: StoreOptions, role: Role) -> Engine:
        url = parse_url(options.url)
        if url.database and url.database != ":memory:":
            _private_database(Path(url.database).expanduser())
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
            if role != "writer":
                # Reads through a memory map: no system call per page a search looks up (3x fewer ms for one
                # search's candidate rows at 100k memories). The map is read-only; writes go through the writer.
                cur.execute(f"PRAGMA mmap_size = {READ_MMAP_BYTES}")
            cur.close()

        @event.listens_for(engine, "begin")
        def _on_begin(conn: Any) -> None:
            # On the DB-API connection: SQLAlchemy's execution path would cost more than the BEGIN itself.
            with driver_errors(conn, begin):
                conn.connection.dbapi_connection.execute(begin)

        return engine

    def exists(self, url: str) -> bool:
        database = parse_url(url).database
        return not database or database == ":memory:" or Path(database).expanduser().exists()

    def memory_hits(self, conn: Connection, query: str, where: Any, limit: int, *, selective: bool,
                    columns: Sequence[Any] = (), kept: dict[Any, Any] | None = None) -> list[fulltext.KeywordHit]:
        # Unless selective, the best PREFILTER_FACTOR * limit matches first: the same hits with fewer row lookups
        # (docs/search.md); a selective filter would drop most of them, so it goes straight to every match.
        terms = fulltext.query_terms(query)
        if not terms:
            return []
        match = fulltext.fts5_match(terms)
        if not selective:
            hits = fulltext.ranked_within(conn, _FTS5_BEST, where, limit, PREFILTER_FACTOR * limit, columns,
                                          kept=kept, params={"match": match, "top": PREFILTER_FACTOR * limit})
            if hits is not None:
                return hits
        return fulltext.ranked(conn, _FTS5_ALL, where, limit, columns, params={"match": match}, kept=kept)

    def ids_in(self, column: ColumnElement[Any], ids: Sequence[str]) -> ColumnElement[bool]:
        # One JSON parameter: the statement compiles once, where an expanded IN list is rendered anew per length.
        return column.in_(text("SELECT value FROM json_each(:ids)").bindparams(ids=json.dumps(list(ids))))

    def by_ids(self, query: Select[Any], column: Column[Any], ids: Sequence[str]) -> Select[Any]:
        # The ids drive the loop (CROSS JOIN fixes SQLite's join order): with no statistics SQLite otherwise
        # prefers any other indexed filter (a search's ``type``: every memory of that type, 98 ms instead of
        # 1.7 ms for 400 candidates at 100k memories) to an IN list of ids.
        given = func.json_each(bindparam(None, json.dumps(list(ids)), type_=String)).table_valued("value")
        given = given.alias("given_ids")
        return query.select_from(_OuterLoop(given, column.table, column == given.c.value))

    def by_bound_ids(self, query: Select[Any], column: Column[Any], name: str) -> Select[Any]:
        given = func.json_each(bindparam(name, type_=String)).table_valued("value").alias("given_ids")
        return query.select_from(_OuterLoop(given, column.table, column == given.c.value))

    def bound_ids(self, ids: Sequence[str]) -> Any:
        return json.dumps(list(ids))

    def chat_matches(self, conn: Connection, query: str) -> TextClause | None:
        terms = fulltext.query_terms(query)
        if not terms:
            return None
        return text("SELECT rowid AS seq, -bm25(chatlog_fts) AS score FROM chatlog_fts WHERE chatlog_fts MATCH :match"
                    ).bindparams(match=fulltext.fts5_match(terms))

    def health(self, conn: Connection) -> list[Fact]:
        found = [str(row[0]) for row in conn.exec_driver_sql("PRAGMA integrity_check(20)")]
        integrity = (Fact("store.integrity", "ok", "PRAGMA integrity_check: ok") if found == ["ok"] else
                     Fact("store.integrity", "fail", f"PRAGMA integrity_check: {'; '.join(found)}",
                          "Stop every m3 process, restore the database from a backup (or try `sqlite3 m3.db "
                          "'.recover'` into a new file), then `m3 store migrate`."))
        mode = str(conn.exec_driver_sql("PRAGMA journal_mode").scalar())
        wal = (Fact("store.wal", "ok", "journal_mode is WAL") if mode.lower() == "wal" else
               Fact("store.wal", "fail", f"journal_mode is {mode}, not WAL",
                    "m3 turns WAL on when it opens the store: stop the program that turned it off, then run any m3 "
                    "command (or `m3 doctor --fix`)."))
        return [integrity, wal]

    def size_bytes(self, conn: Connection) -> int | None:
        # The database's pages, plus the WAL beside it (committed pages not yet checkpointed into the file).
        pages = int(conn.exec_driver_sql("PRAGMA page_count").scalar_one())
        page_size = int(conn.exec_driver_sql("PRAGMA page_size").scalar_one())
        url = conn.engine.url.render_as_string(hide_password=False)
        wal = sum(p.stat().st_size for p in self.files(url) if p.name.endswith("-wal"))
        return pages * page_size + wal

    def files(self, url: str) -> list[Path]:
        database = parse_url(url).database
        if not database or database == ":memory:":
            return []
        db = Path(database).expanduser()
        return [p for p in (db, *(db.with_name(db.name + side) for side in ("-wal", "-shm", "-journal")))
                if p.exists()]

    def begin_erasure(self, conn: Connection) -> None:
        # Deleted content is overwritten with zeros on its page, not just marked free (until scrub turns it off).
        conn.exec_driver_sql("PRAGMA secure_delete = ON")

    def purge_fulltext(self, conn: Connection) -> None:
        # An FTS5 'delete' only adds a tombstone segment: the deleted terms stay in older segments until a merge.
        # 'rebuild' drops the index and builds it again from the rows that remain.
        for table in FTS_TABLES:
            conn.exec_driver_sql(f"INSERT INTO {table}({table}) VALUES ('rebuild')")

    def scrub(self, conn: Connection, tables: list[str]) -> None:
        # VACUUM rewrites the whole file without free pages; the checkpoint then copies the WAL into it and
        # truncates the WAL to zero bytes, so no earlier page image of a deleted row remains in either file.
        raw = conn.connection.dbapi_connection
        assert raw is not None
        try:
            raw.execute("VACUUM")
            busy, _, _ = raw.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        except sqlite3.OperationalError as exc:
            raise StoreError(f"the erasure committed, but the files could not be scrubbed: {exc}",
                             hint=SCRUB_HINT) from exc
        finally:
            raw.execute("PRAGMA secure_delete = OFF")
        if busy:
            raise StoreError("the erasure committed, but another connection kept the WAL from being truncated",
                             hint=SCRUB_HINT)

    def integrity(self, conn: Connection, *, full: bool) -> list[Fact]:
        pragma = "integrity_check" if full else "quick_check"
        found = [str(row[0]) for row in conn.exec_driver_sql(f"PRAGMA {pragma}(20)")]
        facts = [Fact(f"sqlite.{pragma}", "ok" if found == ["ok"] else "fail", "; ".join(found),
                      None if found == ["ok"] else "Restore the database from a backup, or export what is readable "
                                                   "with admin_export and import it into a new store.")]
        return facts

    def fulltext_integrity(self, conn: Connection) -> list[Fact]:
        facts: list[Fact] = []
        for table in FTS_TABLES:
            try:
                # 'integrity-check' compares the index with the table it indexes (content=), raising on a mismatch.
                conn.exec_driver_sql(f"INSERT INTO {table}({table}, rank) VALUES ('integrity-check', 1)")
                facts.append(Fact(f"fts.{table}", "ok", "the full-text index matches its table"))
            except (sqlite3.DatabaseError, DBAPIError) as exc:
                reason = getattr(exc, "orig", exc)  # SQLAlchemy's wrapper repeats the statement: its cause alone
                if "locked" in str(reason) or "busy" in str(reason):  # a writer held the lock past busy_timeout
                    facts.append(Fact(f"fts.{table}", "warn", f"not checked: {reason}",
                                      "Another connection held the write lock; run admin_verify again."))
                    continue
                facts.append(Fact(f"fts.{table}", "fail", f"the full-text index does not match its table: {reason}",
                                  "Run admin_optimise with rebuild_fulltext=true to build it again from the rows."))
        return facts

    def optimise(self, conn: Connection, *, vacuum: bool, rebuild_fulltext: bool) -> list[str]:
        raw = conn.connection.dbapi_connection
        assert raw is not None
        done = [f"INSERT INTO {table}({table}) VALUES ('rebuild')" for table in FTS_TABLES] if rebuild_fulltext else []
        done += [f"INSERT INTO {table}({table}) VALUES ('optimize')" for table in FTS_TABLES]
        for statement in done:
            raw.execute(statement)
        raw.commit()
        done.append("PRAGMA optimize")
        raw.execute("PRAGMA optimize")
        if vacuum:
            raw.execute("VACUUM")
            done.append("VACUUM")
        return done

    def bind_time(self, value: datetime) -> Any:
        # Not strftime: its %Y does not zero-pad years before 1000, which breaks both parsing and ordering.
        return value.replace(tzinfo=None).isoformat(sep=" ", timespec="microseconds")

    def vector_type(self) -> TypeEngine[Any]:
        return LargeBinary()

    def bind_vector(self, vector: npt.NDArray[np.float32]) -> Any:
        return vector.tobytes()

    def read_vector(self, data: bytes) -> npt.NDArray[np.float32]:
        return np.frombuffer(data, dtype="<f4").astype(np.float32, copy=False)


DIALECT: Dialect = SqliteDialect()


#: (seq, score) of the FTS5 matches of ``:match``.
_FTS5_ALL = text(f"SELECT rowid AS seq, -{_FTS5_SCORE} AS score FROM memories_fts WHERE memories_fts MATCH :match")
#: The same, only the best ``:top`` in the final order, each with how many of them there are (``matched``): fewer
#: than ``:top`` means these are every match, so a search that finds fewer hits than it asked for among them need
#: not look at every match again (at 1k memories one question in seven did).
_FTS5_BEST = text(f"SELECT seq, score, count(*) OVER () AS matched FROM ({_FTS5_ALL.text} "
                  f"ORDER BY {_FTS5_SCORE}, rowid DESC LIMIT :top)")


def _private_database(db: Path) -> None:
    """The database and its WAL and SHM files are the owner's only (SQLite gives the WAL and SHM files the
    database's mode); a new folder for it is made 0700, an existing one is left to its owner."""
    if not db.parent.exists():
        log_tightened(private_dir(db.parent))
    changes = private_file(db)
    for side in ("-wal", "-shm", "-journal"):
        changes += private_file(db.with_name(db.name + side), create=False)
    log_tightened(changes)


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


class _OuterLoop(Join):
    """An inner join whose left side SQLite must read first (it renders as ``CROSS JOIN``)."""

    inherit_cache = True


@compiles(_OuterLoop, "sqlite")
def _compile_outer_loop(join: _OuterLoop, compiler: Any, **kw: Any) -> str:
    kw = {**kw, "asfrom": True}
    left, right = compiler.process(join.left, **kw), compiler.process(join.right, **kw)
    del kw["asfrom"]
    return f"{left} CROSS JOIN {right} ON {compiler.process(join.onclause, **kw)}"

