"""Looking at a SQLite store through a fresh connection, as another process would.

Tests use these helpers to check what was really committed: a new stdlib
connection shares nothing with the actors' connections or pools.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import closing, contextmanager
from typing import Any

from sqlalchemy import make_url


def sqlite_path(url: str) -> str:
    path = make_url(url).database
    assert path, f"not a file-backed SQLite URL: {url}"
    return path


@contextmanager
def fresh(url: str) -> Iterator[sqlite3.Connection]:
    """A brand-new connection to the store file, closed on exit."""
    with closing(sqlite3.connect(sqlite_path(url), timeout=10)) as conn:
        yield conn


def existing_ids(url: str, ids: Iterable[str]) -> set[str]:
    """Those of ``ids`` that have a row in ``memories``."""
    wanted = list(ids)
    found: set[str] = set()
    with fresh(url) as conn:
        for start in range(0, len(wanted), 500):
            chunk = wanted[start:start + 500]
            marks = ",".join("?" * len(chunk))
            found.update(r[0] for r in conn.execute(f"SELECT id FROM memories WHERE id IN ({marks})", chunk))
    return found


def count(url: str, table: str, where: str = "1=1", params: tuple[Any, ...] = ()) -> int:
    with fresh(url) as conn:
        return int(conn.execute(f"SELECT count(*) FROM {table} WHERE {where}", params).fetchone()[0])


def dump(url: str, tables: Iterable[str] = ("memories", "memory_history", "memory_relationships",
                                             "memory_embeddings")) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of ``tables``, in a stable order."""
    with fresh(url) as conn:
        return {t: conn.execute(f"SELECT * FROM {t} ORDER BY seq").fetchall() for t in tables}
