"""Rows of memories read by id: the statements search and the graph read candidates and results with.

A search reads its candidates' rows two or three times under one filter (the keyword matches', the dense
proposals', then the results' whole rows), so each :class:`IdReader` builds its statement once and runs it for
any number of id lists; the ids go in as one parameter (a JSON array on SQLite, an array on PostgreSQL), so one
statement serves every length.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, Select, select

from m3.store.dialect import Dialect, dialect_for
from m3.store.memories import chunks
from m3.store.schema import memories as m

#: The columns search ranks by (m3.retrieval.ranking reads these); any other is loaded when first asked for.
RANKING_COLUMNS = tuple(m.c[name] for name in ("id", "title", "importance", "valid_from", "access_count", "pinned",
                                                "conversation_id", "recorded_at"))


class IdReader:
    """Rows of memories by id through one statement, built once and run for any number of id lists (a search
    reads its candidates' rows two or three times under one filter: building and keying the statement cost
    about as much as reading a hundred rows)."""

    def __init__(self, conn: Connection, where: Any = None, columns: Sequence[Any] | None = None):
        """``where``: only rows that also satisfy it; ``columns``: default all (given ones include ``id``)."""
        self._conn = conn
        self._dialect = dialect_for(conn)
        if where is None and columns is None:
            self._statement = _whole_rows(self._dialect)
        else:
            wanted = list(columns) if columns is not None else [m]
            query = select(*wanted) if where is None else select(*wanted).where(where)
            self._statement = self._dialect.by_bound_ids(query, m.c.id, _IDS)

    def __call__(self, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The rows of ``ids`` as dicts keyed by id."""
        out: dict[str, dict[str, Any]] = {}
        for chunk in chunks(ids):
            result = self._conn.execute(self._statement, {_IDS: self._dialect.bound_ids(chunk)})
            # Plain tuples zipped with the names: search reads a few hundred rows per query, and a RowMapping per
            # row cost more than the statement.
            names = list(result.keys())
            for values in result.all():
                row = dict(zip(names, values, strict=True))
                out[row["id"]] = row
        return out


#: The parameter an :class:`IdReader`'s statement takes its ids in.
_IDS = "m3_ids"


#: The statement reading whole rows by id, one per dialect, shared by every reader without a filter or columns: a
#: statement keeps the cache key SQLAlchemy derives on its first run, so a search's results (read through a reader
#: made per search) no longer pay for deriving it each time (docs/benchmarks.md). Statements are immutable.
_WHOLE_ROWS: dict[Dialect, Select[Any]] = {}


def _whole_rows(dialect: Dialect) -> Select[Any]:
    found = _WHOLE_ROWS.get(dialect)
    if found is None:
        found = _WHOLE_ROWS[dialect] = dialect.by_bound_ids(select(m), m.c.id, _IDS)
    return found


def rows_by_ids(conn: Connection, ids: Sequence[str], where: Any = None,
                columns: Sequence[Any] | None = None) -> dict[str, dict[str, Any]]:
    """Rows for ``ids`` that also satisfy ``where``, with ``columns`` (default: all; given ones include ``id``), as
    dicts keyed by id."""
    return IdReader(conn, where, columns)(ids)
