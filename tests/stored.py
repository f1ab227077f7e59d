"""Looking at a store through a fresh connection, as another process would.

Tests use these helpers to check what was really committed: a new engine
(no pool) shares nothing with the actors' connections. They work on both
stores; SQL here uses named parameters (``:name``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import numpy as np
from sqlalchemy import Connection, RowMapping, create_engine, make_url, select, text
from sqlalchemy.pool import NullPool

from m3.store import schema


def sqlite_path(url: str) -> str:
    path = make_url(url).database
    assert make_url(url).get_backend_name() == "sqlite" and path, f"not a file-backed SQLite URL: {url}"
    return path


def is_postgres(url: str) -> bool:
    return make_url(url).get_backend_name() == "postgresql"


@contextmanager
def fresh(url: str) -> Iterator[Connection]:
    """A brand-new connection to the store, closed on exit (its transaction rolled back)."""
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            yield conn
            conn.rollback()
    finally:
        engine.dispose()


def existing_ids(url: str, ids: Iterable[str]) -> set[str]:
    """Those of ``ids`` that have a row in ``memories``."""
    wanted = list(ids)
    found: set[str] = set()
    m = schema.memories
    with fresh(url) as conn:
        for start in range(0, len(wanted), 500):
            found.update(r[0] for r in conn.execute(select(m.c.id).where(m.c.id.in_(wanted[start:start + 500]))))
    return found


def count(url: str, table: str, where: str = "1=1", params: Mapping[str, Any] | None = None) -> int:
    with fresh(url) as conn:
        return int(conn.execute(text(f"SELECT count(*) FROM {table} WHERE {where}"), dict(params or {})).scalar_one())


def memory(url: str, memory_id: str) -> RowMapping:
    """One memory row, typed (times are aware datetimes)."""
    with fresh(url) as conn:
        row = conn.execute(select(schema.memories).where(schema.memories.c.id == memory_id)).mappings().first()
    assert row is not None, memory_id
    return row


def _plain(value: Any) -> Any:
    return value.tobytes() if isinstance(value, np.ndarray) else value


def dump(url: str, tables: Iterable[str] = ("memories", "memory_history", "memory_relationships",
                                             "memory_embeddings")) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of ``tables`` (the schema's columns, typed; vectors as bytes), in a stable order."""
    with fresh(url) as conn:
        return {t: [tuple(_plain(v) for v in row)
                    for row in conn.execute(select(schema.metadata.tables[t]).order_by(text("seq")))]
                for t in tables}
