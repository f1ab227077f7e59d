"""PostgreSQL specifics: its Dialect (engines, tsvector search, types, errors), HNSW per model, locks, databases.

The driver (psycopg 3) and pgvector come with the ``[postgres]`` extra and are imported only when a PostgreSQL
store is opened. How the store uses binary vectors, one partial HNSW index per model, iterative scans and
advisory locks is in docs/postgres.md.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import re
import urllib.parse
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import (
    Column,
    Connection,
    Engine,
    Select,
    String,
    any_,
    bindparam,
    create_engine,
    event,
    literal,
    select,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.engine import URL, make_url
from sqlalchemy.pool import NullPool
from sqlalchemy.sql.elements import ColumnElement, TextClause
from sqlalchemy.types import DateTime, TypeEngine

from m3.errors import ConfigError, ExtraNotInstalled, StoreError
from m3.store.dialect import Dialect, Fact
from m3.store.fulltext import KeywordHit, ranked
from m3.store.pg_fulltext import matches
from m3.store.schema import memory_embeddings as e
from m3.store.types import pg_vector_of

if TYPE_CHECKING:
    from m3.store.engine import Role, StoreOptions

log = logging.getLogger(__name__)

Matrix = npt.NDArray[np.float32]
HNSW_M, HNSW_EF_CONSTRUCTION = 16, 64
_VECTOR_REGISTERED = "m3_vector_registered"
_PLAIN_VALUE = re.compile(r"[A-Za-z0-9/._-]+")


#: What to do when an erasure committed but its scrub could not finish.
SCRUB_HINT = ("Another connection held a lock on the store: call gdpr_forget again once it is done (it finds nothing "
              "left to erase and scrubs the files).")


class PostgresDialect(Dialect):
    """The :class:`m3.store.dialect.Dialect` of PostgreSQL with pgvector."""

    nearest_in_sql = True
    serial_writes = False
    syncs = False
    migration_hint: str | None = ("On PostgreSQL the pgvector extension must be installed on the server, and m3's "
                                  "role must be allowed to create it or find it created (docs/postgres.md).")
    time_type: TypeEngine[Any] = DateTime(timezone=True)

    def engine(self, options: StoreOptions, role: Role) -> Engine:
        """An engine for one actor: UTC sessions, vectors registered, HNSW iterative scans.

        Readers run each request in one REPEATABLE READ snapshot (as on SQLite);
        writers stay READ COMMITTED, wait at most ``store.busy_timeout_ms`` for a lock
        held by another connection, and see other processes' commits statement
        by statement (which exactly-once supersession relies on).
        """
        parsed = make_url(options.url)
        if parsed.drivername != "postgresql+psycopg":
            raise ConfigError(f"unsupported PostgreSQL driver {parsed.drivername!r}",
                              hint="Use a postgresql+psycopg:// URL (psycopg 3, installed by the [postgres] extra).")
        _require_driver()
        settings = ["SET TIME ZONE 'UTC'", "SET hnsw.iterative_scan = strict_order"]
        if role == "writer":
            settings.append(f"SET lock_timeout = {int(options.busy_timeout_ms)}")
        pool: dict[str, Any] = {"pool_size": 2, "max_overflow": 2, "pool_pre_ping": True,
                                "connect_args": {"application_name": f"m3 {role}"}}
        if role == "reader":
            pool["isolation_level"] = "REPEATABLE READ"
        engine = create_engine(parsed, **pool)

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_conn: Any, record: Any) -> None:
            with dbapi_conn.cursor() as cur:
                for statement in settings:
                    cur.execute(statement)
            dbapi_conn.commit()  # a SET inside a transaction that is later rolled back would be undone
            record.info[_VECTOR_REGISTERED] = _register_vector(dbapi_conn)

        @event.listens_for(engine, "checkout")
        def _on_checkout(dbapi_conn: Any, record: Any, _proxy: Any) -> None:
            # A connection opened before the first migration created the extension learns the type now.
            if not record.info.get(_VECTOR_REGISTERED, True):
                record.info[_VECTOR_REGISTERED] = _register_vector(dbapi_conn)

        return engine

    def lock_migrations(self, conn: Connection) -> None:
        conn.execute(text("SELECT pg_advisory_xact_lock(7283711)"))

    def status(self, conn: Connection) -> dict[str, Any]:
        return {"postgres": server_details(conn)}

    def size_bytes(self, conn: Connection) -> int | None:
        return int(conn.exec_driver_sql("SELECT pg_database_size(current_database())").scalar_one())

    def health(self, conn: Connection) -> list[Fact]:
        return [_vector_extension(conn), *_index_health(conn)]

    def memory_hits(self, conn: Connection, query: str, where: Any, limit: int, *, selective: bool,
                    columns: Sequence[Any] = (), kept: dict[Any, Any] | None = None) -> list[KeywordHit]:
        # The title is searched but not scored, as on SQLite.
        matching = "t.fts_content @@ CAST(:msq AS tsquery) OR t.fts_title @@ CAST(:msq AS tsquery)"
        found = matches(conn, "memories", matching, query)
        if found is None:
            return []
        statement, params = found
        return ranked(conn, statement, where, limit, columns, params=params, kept=kept)

    def chat_matches(self, conn: Connection, query: str) -> TextClause | None:
        found = matches(conn, "chatlog", "t.fts_content @@ CAST(:msq AS tsquery)", query)
        return None if found is None else found[0].bindparams(**found[1])

    def ids_in(self, column: ColumnElement[Any], ids: Sequence[str]) -> ColumnElement[bool]:
        # One array parameter: an expanded IN list of a search's 100-200 candidates is rendered and bound value by
        # value on every execution, which cost ten times the statement itself.
        return column == any_(bindparam(None, list(ids), type_=ARRAY(String)))

    def by_bound_ids(self, query: Select[Any], column: Column[Any], name: str) -> Select[Any]:
        return query.where(column == any_(bindparam(name, type_=ARRAY(String))))

    def vector_type(self) -> TypeEngine[Any]:
        return pg_vector_of(None)

    def bind_vector(self, vector: Matrix) -> Any:
        return vector  # psycopg sends it in pgvector's binary format

    def read_vector(self, data: bytes) -> Matrix:
        # vector_send: uint16 dimensions, uint16 unused, then big-endian float4s
        return np.frombuffer(data, dtype=">f4", offset=4).astype(np.float32)

    def scrub(self, conn: Connection, tables: list[str]) -> None:
        # A DELETE leaves dead tuples in the table's pages (and their index entries) until VACUUM; VACUUM (FULL)
        # writes each table and its indexes and TOAST to new files, and the old files are truncated at commit.
        # What remains is the WAL, until its segments are recycled (docs/governance.md).
        raw = conn.connection.dbapi_connection
        assert raw is not None
        raw.autocommit = True
        cur = raw.cursor()
        try:
            for table in tables:
                cur.execute(f"VACUUM (FULL) {_quote(conn, table)}")
        except Exception as exc:
            raise StoreError(f"the erasure committed, but VACUUM (FULL) could not rewrite {table}: "
                             f"{type(exc).__name__}", hint=SCRUB_HINT) from exc
        finally:
            cur.close()
            raw.autocommit = False

    def after_import(self, conn: Connection, tables: list[str]) -> None:
        for table in tables:
            name = _quote(conn, table)
            conn.execute(text(f"SELECT setval(pg_get_serial_sequence(:t, 'seq'), "
                              f"(SELECT coalesce(max(seq), 0) + 1 FROM {name}), false)").bindparams(t=table))

    def after_bulk_insert(self, conn: Connection, tables: list[str]) -> None:
        # Autovacuum analyzes within a minute or so; until then the planner and the keyword leg's word
        # frequencies describe the store before the import (searches measured 2x slower meanwhile).
        if tables:
            conn.execute(text("ANALYZE " + ", ".join(_quote(conn, t) for t in tables)))

    def optimise(self, conn: Connection, *, vacuum: bool, rebuild_fulltext: bool) -> list[str]:
        # The tsvector columns are generated from their rows, so there is no full-text index to rebuild.
        # VACUUM cannot run inside a transaction block: the raw connection runs it in autocommit.
        statement = "VACUUM (FULL, ANALYZE)" if vacuum else "VACUUM (ANALYZE)"
        raw = conn.connection.dbapi_connection
        assert raw is not None
        raw.autocommit = True
        try:
            raw.cursor().execute(statement)
        finally:
            raw.autocommit = False
        return [statement]

    def store_error(self, exc: BaseException) -> StoreError | None:
        sqlstate = getattr(getattr(exc, "orig", None), "sqlstate", None)
        if sqlstate == "55P03":
            return StoreError("the store is locked by another connection (lock timeout)",
                              hint="Another process holds a lock on the store; retry, or raise store.busy_timeout_ms.")
        return None

    def retryable(self, exc: BaseException) -> bool:
        return getattr(getattr(exc, "orig", None), "sqlstate", None) in {"40001", "40P01"}


DIALECT: Dialect = PostgresDialect()


def _require_driver() -> None:
    try:
        import pgvector  # noqa: F401
        import psycopg  # noqa: F401
    except ImportError as exc:
        raise ExtraNotInstalled(f"PostgreSQL support is not installed ({exc.name} is missing)") from None


def _register_vector(dbapi_conn: Any) -> bool:
    """Teach one psycopg connection pgvector's types; False while the extension does not exist yet."""
    from pgvector.psycopg import register_vector
    from psycopg import ProgrammingError

    try:
        register_vector(dbapi_conn)
    except ProgrammingError:
        dbapi_conn.rollback()
        return False
    dbapi_conn.commit()
    return True


# -- databases -------------------------------------------------------------------------------------

@contextlib.contextmanager
def _admin(server_url: str) -> Iterator[Connection]:
    """An AUTOCOMMIT connection to the server's ``postgres`` database (CREATE/DROP DATABASE cannot run in a
    transaction), disposed of afterwards."""
    _require_driver()
    engine = create_engine(make_url(server_url).set(database="postgres"), isolation_level="AUTOCOMMIT",
                           poolclass=NullPool)
    try:
        with engine.connect() as conn:
            yield conn
    finally:
        engine.dispose()


def _quote(conn: Connection, name: str) -> str:
    return str(conn.dialect.identifier_preparer.quote(name))


def create_database(server_url: str, name: str) -> bool:
    """Create database ``name`` on the server of ``server_url`` unless it exists; True when created.

    Serialised by a session advisory lock: two processes creating the same
    database at once would otherwise race into a unique violation.
    """
    with _admin(server_url) as conn:
        key = lock_key("create-database", name)
        conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": key})
        try:
            if conn.scalar(text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": name}):
                return False
            conn.exec_driver_sql(f"CREATE DATABASE {_quote(conn, name)}")
            return True
        finally:
            conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": key})


def redact(url: str | URL) -> str:
    """The URL with its password replaced by ``***`` (query values left readable when that is unambiguous)."""
    parsed = make_url(url)
    shown = parsed.render_as_string(hide_password=True)
    base, _, query = shown.partition("?")
    if query and all(_PLAIN_VALUE.fullmatch(str(v)) for v in parsed.query.values()):
        return f"{base}?{urllib.parse.unquote(query)}"
    return shown


# -- advisory locks --------------------------------------------------------------------------------

def lock_key(namespace: str, *parts: Any) -> int:
    """A signed 64-bit advisory-lock key for ``namespace`` and ``parts`` (stable across processes)."""
    digest = hashlib.blake2b(repr((namespace, *parts)).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def lock_all(conn: Connection, keys: Iterable[int]) -> None:
    """Take transaction-scoped advisory locks on ``keys``, in ascending order (no lock-order deadlock)."""
    ordered = sorted(set(keys))
    if ordered:
        conn.execute(text("SELECT count(pg_advisory_xact_lock(k)) FROM unnest(CAST(:keys AS bigint[])) AS k"),
                     {"keys": ordered})


# -- HNSW per model --------------------------------------------------------------------------------

def ensure_hnsw_index(conn: Connection, model: str, dim: int) -> bool:
    """Create the HNSW index of ``model`` at ``dim`` if missing (inside the caller's transaction); True if created.

    Call before writing anything in the transaction: CREATE INDEX waits for
    other writers of the table, which must not be waiting for us.
    """
    name = f"ix_embeddings_hnsw_{hashlib.sha256(model.encode('utf-8')).hexdigest()[:12]}_{int(dim)}"
    if _index_exists(conn, name):
        return False
    lock_all(conn, [lock_key("hnsw", model, int(dim))])
    if _index_exists(conn, name):  # another process created it while we waited for the lock
        return False
    # The model inlined, not bound: the planner must see the literal to use the partial index.
    model_sql = literal(model, String()).compile(dialect=conn.dialect, compile_kwargs={"literal_binds": True})
    conn.exec_driver_sql(
        f"CREATE INDEX {name} ON memory_embeddings USING hnsw ((vector::vector({int(dim)})) vector_cosine_ops) "
        f"WITH (m = {HNSW_M}, ef_construction = {HNSW_EF_CONSTRUCTION}) "
        f"WHERE model = {model_sql} AND dim = {int(dim)}"
    )
    log.info("created HNSW index %s for model %s (%d dimensions)", name, model, dim)
    return True


def _index_exists(conn: Connection, name: str) -> bool:
    # A scan of pg_class with this statement's snapshot, not to_regclass(): name lookups go through the
    # catalog cache, which an advisory-lock wait does not refresh, and would miss an index committed meanwhile.
    return conn.execute(text(
        "SELECT 1 FROM pg_class WHERE relname = :n AND relnamespace = CAST(current_schema() AS regnamespace)"),
        {"n": name}).first() is not None


def has_vectors(conn: Connection, model: str) -> bool:
    return conn.execute(select(e.c.seq).where(e.c.model == model).limit(1)).first() is not None


def server_details(conn: Connection) -> dict[str, Any]:
    """Server and pgvector versions, for ``m3 store status``."""
    version = conn.scalar(text("SHOW server_version"))
    vector = conn.scalar(text("SELECT extversion FROM pg_extension WHERE extname = 'vector'"))
    indexes = [r[0] for r in conn.execute(text(
        "SELECT indexname FROM pg_indexes WHERE tablename = 'memory_embeddings' "
        "AND indexname LIKE 'ix_embeddings_hnsw_%' ORDER BY indexname"))]
    return {"server_version": version, "pgvector": vector, "hnsw_indexes": indexes}


# -- m3 doctor: the extension, invalid indexes, amcheck when installed ("amcheck-lite" without it) -------------

_SCHEMA_INDEXES = ("SELECT c.oid, c.relname, i.indisvalid, a.amname FROM pg_index i "
                   "JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_namespace n ON n.oid = c.relnamespace "
                   "JOIN pg_am a ON a.oid = c.relam WHERE n.nspname = current_schema() ORDER BY c.relname")


def _vector_extension(conn: Connection) -> Fact:
    version = conn.execute(text("SELECT extversion FROM pg_extension WHERE extname = 'vector'")).scalar()
    if version is None:
        return Fact("store.pgvector", "fail", "the pgvector extension is not installed in this database",
                    "Run `CREATE EXTENSION vector;` as a superuser (m3 tries it when migrating).")
    return Fact("store.pgvector", "ok", f"pgvector {version}")


def _index_health(conn: Connection) -> list[Fact]:
    rows = conn.execute(text(_SCHEMA_INDEXES)).all()
    invalid = [str(r.relname) for r in rows if not r.indisvalid]
    facts = [Fact("store.indexes", "fail", f"invalid indexes (a failed concurrent build): {', '.join(invalid)}",
                  f"Run `REINDEX INDEX {invalid[0]};` for each, or drop them and `m3 store migrate`.")
             if invalid else Fact("store.indexes", "ok", f"{len(rows)} indexes, all valid")]
    if conn.execute(text("SELECT 1 FROM pg_extension WHERE extname = 'amcheck'")).first() is None:
        facts.append(Fact("store.integrity", "ok", "indexes valid; B-tree structure not verified (amcheck is not "
                          "installed)", "For a deeper check, `CREATE EXTENSION amcheck;` and run doctor again."))
        return facts
    broken = []
    for row in rows:
        if row.amname == "btree" and row.indisvalid:
            try:
                with conn.begin_nested():
                    conn.execute(text("SELECT bt_index_check(:oid)"), {"oid": row.oid})
            except Exception as exc:  # amcheck reports corruption as an error of the statement
                broken.append(f"{row.relname}: {str(getattr(exc, 'orig', exc)).strip().splitlines()[0]}")
    facts.append(Fact("store.integrity", "fail", f"amcheck: {'; '.join(broken)}",
                      "REINDEX the indexes named, then run doctor again.") if broken
                 else Fact("store.integrity", "ok", "amcheck bt_index_check: every B-tree index is sound"))
    return facts
