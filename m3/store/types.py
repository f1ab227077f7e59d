"""Column types that behave the same on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import JSON, DateTime, LargeBinary, String
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator, TypeEngine

_SQLITE_FORMAT = "%Y-%m-%d %H:%M:%S.%f"


class UTCDateTime(TypeDecorator[datetime]):
    """An aware UTC datetime.

    SQLite keeps it as fixed-width text (``YYYY-MM-DD HH:MM:SS.ffffff``) so
    that string order is time order; PostgreSQL uses ``timestamptz``.
    """

    impl = DateTime
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "sqlite":
            return dialect.type_descriptor(String(26))
        return dialect.type_descriptor(DateTime(timezone=True))

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> Any:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to the store; use UTC-aware times")
        value = value.astimezone(UTC)
        if dialect.name != "sqlite":
            return value
        # Not strftime: its %Y does not zero-pad years before 1000, which breaks both parsing and ordering.
        return value.replace(tzinfo=None).isoformat(sep=" ", timespec="microseconds")

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if isinstance(value, str):
            return datetime.strptime(value, _SQLITE_FORMAT).replace(tzinfo=UTC)
        if isinstance(value, datetime):
            return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
        raise TypeError(f"unexpected time value {value!r}")


def json_type() -> TypeEngine[Any]:
    """JSON on SQLite, JSONB on PostgreSQL."""
    return JSON().with_variant(JSONB(), "postgresql")


class VectorType(TypeDecorator[npt.NDArray[np.float32]]):
    """A float32 vector: a little-endian BLOB on SQLite, pgvector's ``vector`` on PostgreSQL.

    The dimension is not part of the column because one table holds the
    vectors of several models; PostgreSQL indexes cast per model.
    """

    impl = LargeBinary
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "postgresql":
            from pgvector.sqlalchemy import Vector  # optional dependency: the [postgres] extra

            return dialect.type_descriptor(Vector())
        return dialect.type_descriptor(LargeBinary())

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        if value is None:
            return None
        arr = np.asarray(value, dtype="<f4").reshape(-1)
        if dialect.name == "postgresql":
            return arr
        return arr.tobytes()

    def process_result_value(self, value: Any, dialect: Dialect) -> npt.NDArray[np.float32] | None:
        if value is None:
            return None
        if isinstance(value, bytes | bytearray | memoryview):
            return np.frombuffer(bytes(value), dtype="<f4").astype(np.float32, copy=False)
        return np.asarray(value, dtype=np.float32)
