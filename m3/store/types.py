"""Column types that behave the same on SQLite and PostgreSQL (each dialect module adapts them)."""

from __future__ import annotations

import functools
from datetime import UTC, datetime
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import JSON, DateTime, LargeBinary
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator, TypeEngine

from m3.store.dialect import dialect_for

#: Characters of a time as SQLite keeps it (``YYYY-MM-DD HH:MM:SS.ffffff``, UTC without a zone).
_STORED_TIME_WIDTH = 26


class UTCDateTime(TypeDecorator[datetime]):
    """An aware UTC datetime.

    SQLite keeps it as fixed-width text (``YYYY-MM-DD HH:MM:SS.ffffff``) so
    that string order is time order; PostgreSQL uses ``timestamptz``.
    """

    impl = DateTime
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        return dialect.type_descriptor(dialect_for(dialect).time_type)

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> Any:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to the store; use UTC-aware times")
        return dialect_for(dialect).bind_time(value.astimezone(UTC))

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if isinstance(value, str):
            # The fixed-width text written above; fromisoformat reads it ~30x faster than strptime (search
            # reads thousands of times per query), and reading it with its zone in the same call costs a fifth
            # of a replace() afterwards. A value with an offset (not written by m3) is converted.
            if len(value) == _STORED_TIME_WIDTH:
                return datetime.fromisoformat(value + "+00:00")
            value = datetime.fromisoformat(value)
        if isinstance(value, datetime):
            if value.tzinfo is UTC:  # PostgreSQL's sessions run in UTC
                return value
            return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
        raise TypeError(f"unexpected time value {value!r}")


def json_type() -> TypeEngine[Any]:
    """JSON on SQLite, JSONB on PostgreSQL."""
    return JSON().with_variant(JSONB(), "postgresql")


class VectorType(TypeDecorator[npt.NDArray[np.float32]]):
    """A float32 vector: a little-endian BLOB on SQLite, pgvector's ``vector`` on PostgreSQL.

    The dimension is not part of the column because one table holds the
    vectors of several models; PostgreSQL indexes cast per model. On
    PostgreSQL values go out as numpy arrays in pgvector's binary format
    (the connection registers pgvector's psycopg adapters) and come back
    through ``vector_send``, so neither direction formats text.
    """

    impl = LargeBinary
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        return dialect.type_descriptor(dialect_for(dialect).vector_type())

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        if value is None:
            return None
        return dialect_for(dialect).bind_vector(np.asarray(value, dtype="<f4").reshape(-1))

    def process_result_value(self, value: Any, dialect: Dialect) -> npt.NDArray[np.float32] | None:
        if value is None:
            return None
        # Bytes on both dialects: a BLOB on SQLite; on PostgreSQL every selected vector goes through vector_send.
        return dialect_for(dialect).read_vector(value)


def pg_vector_of(dim: int | None) -> TypeEngine[Any]:
    """pgvector's ``vector`` (``vector(dim)`` when given) without its text conversions (PostgreSQL only).

    Importing ``pgvector.sqlalchemy`` also lets SQLAlchemy reflect ``vector``
    columns (Alembic's schema comparison) instead of warning about them.
    """
    return _pg_vector()(dim)  # type: ignore[no-any-return]


@functools.cache
def _pg_vector() -> Any:
    """The type class, defined on first use: pgvector comes with the ``[postgres]`` extra."""
    from pgvector.sqlalchemy import VECTOR
    from sqlalchemy import func

    class PgVector(VECTOR):
        cache_ok = True  # read from the class's own __dict__: a subclass must repeat it

        def bind_processor(self, dialect: Dialect) -> None:
            return None  # VectorType hands over a float32 array; psycopg sends it binary

        def result_processor(self, dialect: Dialect, coltype: Any) -> None:
            return None

        def column_expression(self, colexpr: Any) -> Any:
            # Typed as the column, so the column's own result processing parses the bytes.
            return func.vector_send(colexpr, type_=colexpr.type)

    return PgVector
