"""Statements the write path runs on every write, executed straight on the DB-API cursor.

A write's few statements cost more in SQLAlchemy's per-call work (execution context, cache key, parameter
processing, result set-up) than in the database itself: about two thirds of the Writer's time for one
``memory_write`` on SQLite (docs/benchmarks.md, "One write, end to end"). A :class:`DirectInsert` is
compiled by SQLAlchemy once per dialect and then run on the transaction's own DB-API connection, each
value passed through its column type's own bind processor: the same SQL and the same stored values as
``conn.execute(insert(table), rows)``, inside the same transaction (tests/store/test_direct.py compares
the two on both stores). A driver error comes out as SQLAlchemy would raise it (:func:`driver_errors`), so
the Writer's retries and error codes see no difference.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Table, insert
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError

__all__ = ["DirectInsert", "driver_errors"]

Bind = Callable[[Any], Any] | None


@dataclass(frozen=True)
class _Plan:
    """One table's INSERT for one dialect: the SQL and, per column in parameter order, its bind processor."""

    sql: str
    columns: tuple[str, ...]
    binds: tuple[Bind, ...]
    positional: bool

    def parameters(self, row: Mapping[str, Any]) -> Any:
        values = [row[c] if bind is None else bind(row[c]) for c, bind in zip(self.columns, self.binds, strict=True)]
        return tuple(values) if self.positional else dict(zip(self.columns, values, strict=True))


class DirectInsert:
    """``INSERT INTO table (columns…)`` of rows that each give every one of ``columns``."""

    def __init__(self, table: Table, columns: Sequence[str]):
        unknown = set(columns) - set(table.c.keys())
        if unknown:
            raise ValueError(f"{table.name} has no columns {sorted(unknown)}")
        self.table = table
        self.columns = tuple(columns)

    def __call__(self, conn: Connection, rows: Sequence[Mapping[str, Any]]) -> None:
        """Insert ``rows`` in ``conn``'s transaction (one executemany)."""
        if not rows:
            return
        plan = _plan(self.table, self.columns, conn.dialect)
        parameters = [plan.parameters(row) for row in rows]
        with driver_errors(conn, plan.sql):
            cursor = conn.connection.cursor()
            try:
                if len(parameters) == 1:
                    cursor.execute(plan.sql, parameters[0])
                else:
                    cursor.executemany(plan.sql, parameters)
            finally:
                cursor.close()


@contextmanager
def driver_errors(conn: Connection, statement: str) -> Iterator[None]:
    """Raise a DB-API error of the block as SQLAlchemy's own execution would: the matching
    :class:`sqlalchemy.exc.DBAPIError` subclass (``OperationalError`` for a lock or a deadlock, ...), the
    connection invalidated first when the error means it was lost."""
    dialect = conn.dialect
    try:
        yield
    except dialect.loaded_dbapi.Error as exc:
        lost = dialect.is_disconnect(exc, conn.connection.dbapi_connection, None)
        if lost:
            conn.invalidate(exc)
        raise DBAPIError.instance(statement, None, exc, dialect.loaded_dbapi.Error, connection_invalidated=lost,
                                  dialect=dialect) from exc


@functools.lru_cache(maxsize=64)
def _plan(table: Table, columns: tuple[str, ...], dialect: Dialect) -> _Plan:
    # Keyed by the dialect instance: each engine has its own, and its processors depend on its settings
    # (e.g. the JSON serializer). A plan is immutable, so actors may share it.
    compiled = insert(table).compile(dialect=dialect, column_keys=list(columns))
    order = tuple(compiled.positiontup or ()) if compiled.positional else columns
    if set(order) != set(columns):
        raise ValueError(f"unexpected parameters {order} for {table.name}{columns}")
    binds = tuple(table.c[name].type.dialect_impl(dialect).bind_processor(dialect) for name in order)
    return _Plan(sql=compiled.string, columns=order, binds=binds, positional=bool(compiled.positional))
