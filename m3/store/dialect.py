"""One interface over the SQL dialects m3 stores in, each one module: :mod:`m3.store.sqlite`, :mod:`m3.store.postgres`.

Code asks :func:`dialect_for` once and calls the interface; no other module compares dialect names
(docs/architecture.md says where the rule has exceptions; tests/store/test_dialect.py checks it).
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast

import numpy as np
import numpy.typing as npt
from sqlalchemy import URL, Column, ColumnElement, Connection, Engine, Select, TextClause, bindparam, make_url
from sqlalchemy.engine import Dialect as SqlaDialect
from sqlalchemy.exc import ArgumentError
from sqlalchemy.types import TypeEngine

from m3.errors import ConfigError, StoreError

if TYPE_CHECKING:
    from m3.store.engine import Role, StoreOptions
    from m3.store.fulltext import KeywordHit

#: The module of each SQLAlchemy backend name, imported on first use (PostgreSQL's needs an extra to run).
_MODULES = {"sqlite": "m3.store.sqlite", "postgresql": "m3.store.postgres"}
_LOADED: dict[str, Dialect] = {}


@dataclass(frozen=True)
class Fact:
    """One finding of a dialect's health check (``m3 doctor``): ``ok``, ``warn`` or ``fail``, and what to do."""

    check: str
    status: Literal["ok", "warn", "fail"]
    message: str
    hint: str | None = None


class Dialect(Protocol):
    """What differs between the SQL dialects m3 stores in; a dialect class subclasses it for the defaults."""

    #: The database ranks vectors itself (pgvector), so no process needs a store's vectors in memory.
    nearest_in_sql: bool
    #: One write transaction at a time across all processes (SQLite): what one reads stays true to its commit.
    serial_writes: bool
    #: The store can sync with a warehouse (docs/sync.md): a SQLite store; a PostgreSQL one is shared already.
    syncs: bool
    #: What to check when a migration fails on this dialect.
    migration_hint: str | None
    #: The column type of an aware UTC datetime.
    time_type: TypeEngine[Any]

    def engine(self, options: StoreOptions, role: Role) -> Engine:
        """An engine for one actor, with this dialect's session settings."""

    def exists(self, url: str) -> bool:
        """False only when the store certainly does not exist yet (no SQLite file); no connection is made."""
        return True

    def lock_migrations(self, conn: Connection) -> None:
        """Serialise concurrent first starts of several processes on one database (in ``conn``'s transaction)."""
        return None

    def status(self, conn: Connection) -> dict[str, Any]:
        """This dialect's own facts for ``m3 store status`` (merged into the report)."""
        return {}

    def size_bytes(self, conn: Connection) -> int | None:
        """How many bytes the store takes on disk (None where the backend cannot say)."""
        return None

    def health(self, conn: Connection) -> list[Fact]:
        """This dialect's checks of an open store for ``m3 doctor`` (integrity, journal mode, indexes)."""
        return []

    def files(self, url: str) -> list[Path]:
        """The store's files on this machine that must be owner-only (SQLite: the database, WAL and SHM)."""
        return []

    def memory_hits(self, conn: Connection, query: str, where: Any, limit: int, *, selective: bool,
                    columns: Sequence[Any] = (), kept: dict[Any, Any] | None = None) -> list[KeywordHit]:
        """Memories matching ``where`` and any word of ``query``: best keyword score first, then newest.

        ``selective`` says the filter will likely drop most matches (one conversation, one type, one agent), which
        a dialect may use to choose how it searches; the hits are the same either way. ``columns`` (memories'
        columns, ``id`` among them, or labelled expressions over them): each hit comes with them as its ``row``,
        read by the same statement. ``kept``: where the statements built for ``where`` on ``conn`` are kept for
        the next search under it (the caller's, cleared when ``where`` is no longer used).
        """

    def chat_matches(self, conn: Connection, query: str) -> TextClause | None:
        """(seq, score) of chat messages matching any word of ``query``; None when it holds nothing to search for."""

    def ids_in(self, column: ColumnElement[Any], ids: Sequence[str]) -> ColumnElement[bool]:
        """``column IN ids``; a dialect may pass the list as one parameter (one cached statement for any length)."""
        return column.in_(ids)

    def by_ids(self, query: Select[Any], column: Column[Any], ids: Sequence[str]) -> Select[Any]:
        """``query`` narrowed to the rows whose ``column`` (a unique key) is one of ``ids``, found by that key
        whatever else ``query`` filters on; a row may come once per time its key is given."""
        return query.where(self.ids_in(column, ids))

    def by_bound_ids(self, query: Select[Any], column: Column[Any], name: str) -> Select[Any]:
        """:meth:`by_ids` for ids given when the statement runs, as the parameter ``name`` (its value from
        :meth:`bound_ids`): one statement for any number of id lists."""
        return query.where(column.in_(bindparam(name, expanding=True)))

    def bound_ids(self, ids: Sequence[str]) -> Any:
        """The value of :meth:`by_bound_ids`'s parameter for ``ids``."""
        return list(ids)

    def bind_time(self, value: datetime) -> Any:
        """An aware UTC datetime as ``time_type`` takes it."""
        return value

    def vector_type(self) -> TypeEngine[Any]:
        """The column type of a float32 vector of any dimension."""

    def bind_vector(self, vector: npt.NDArray[np.float32]) -> Any:
        """A little-endian float32 vector as ``vector_type()`` takes it."""

    def read_vector(self, data: bytes) -> npt.NDArray[np.float32]:
        """A vector read back as bytes from ``vector_type()``."""

    def store_error(self, exc: BaseException) -> StoreError | None:
        """A clear StoreError for a failure whose driver text alone would puzzle a user; None otherwise."""
        return None

    def begin_erasure(self, conn: Connection) -> None:
        """Before an erasure's deletes, in its transaction: make freed space hold no copy of the deleted bytes."""
        return None

    def purge_fulltext(self, conn: Connection) -> None:
        """In an erasure's transaction, after its deletes: leave no term of the deleted text in a full-text index."""
        return None

    def scrub(self, conn: Connection, tables: list[str]) -> None:
        """After an erasure committed (no transaction open on ``conn``): rewrite ``tables`` so that the database
        files keep no copy of the deleted rows (docs/governance.md says what remains)."""
        return None

    def after_import(self, conn: Connection, tables: list[str]) -> None:
        """In an import's transaction, after rows were inserted with their own ``seq``: make the next ``seq``
        each of ``tables`` assigns follow the largest one (SQLite's rowid does so by itself)."""
        return None

    def after_bulk_insert(self, conn: Connection, tables: list[str]) -> None:
        """In the transaction of a bulk insert (an import): refresh what the planner knows of ``tables`` where
        stale statistics would slow every later search. SQLite keeps none on purpose: nothing."""
        return None

    def optimise(self, conn: Connection, *, vacuum: bool, rebuild_fulltext: bool) -> list[str]:
        """With no transaction open on ``conn``: refresh the planner's statistics and compact the full-text
        indexes (``rebuild_fulltext``: build them again from their tables first; ``vacuum``: also rewrite the
        database to return free space); the statements it ran."""
        return []

    def integrity(self, conn: Connection, *, full: bool) -> list[Fact]:
        """This dialect's own consistency check of the database (admin_verify). ``full``: the thorough check,
        else the quick one. Reports, never repairs."""
        return []

    def fulltext_integrity(self, conn: Connection) -> list[Fact]:
        """The full-text indexes checked against their tables (admin_verify), in a write transaction (SQLite's
        check takes the write lock). Reports, never repairs."""
        return []

    def retryable(self, exc: BaseException) -> bool:
        """True when the transaction lost a deadlock or serialization race, so running it again is safe."""
        return False


def parse_url(url: str) -> URL:
    """The store URL parsed; a ConfigError (which never repeats the URL: it may hold a password) if malformed."""
    try:
        return make_url(url)
    except ArgumentError:
        raise ConfigError("store.url is not a valid database URL",
                          hint="Use sqlite:///<path> or postgresql+psycopg://user@host/db "
                               "(see docs/postgres.md).") from None


def dialect_for(where: str | URL | Engine | Connection | SqlaDialect) -> Dialect:
    """The dialect of a store URL, engine, connection or SQLAlchemy dialect.

    Raises:
        ConfigError: the URL is malformed or names a database m3 cannot store in.
    """
    if isinstance(where, str):
        where = parse_url(where)
    name = where.get_backend_name() if isinstance(where, URL) else (
        where.name if isinstance(where, SqlaDialect) else where.dialect.name)
    found = _LOADED.get(name)
    if found is None:
        if name not in _MODULES:
            raise ConfigError(f"unsupported store backend {name!r}",
                              hint="Use a sqlite:/// or postgresql+psycopg:// URL.")
        found = _LOADED[name] = cast(Dialect, importlib.import_module(_MODULES[name]).DIALECT)
    return found
