"""Load an export (:mod:`m3.store.dump`) into a store, in the Writer's one transaction (admin_import).

Into an empty store every row keeps its ``seq``, so the two stores' tables are identical row for row. With
``merge`` a row whose identity is already present is skipped and the others get new ``seq`` values; a row's
identity is its ``id`` where the table has one, else the table's unique key, else its primary key, else all of
its columns but ``seq`` (history events, audit rows).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Column, Connection, Table, UniqueConstraint, func, select

from m3.errors import StoreNotEmpty
from m3.store import schema
from m3.store.dialect import dialect_for
from m3.store.dump import TABLES, encode

#: Rows per INSERT statement.
CHUNK = 500
#: Tables of the store's own state rather than content: a store that just started records its embedding model
#: there. They do not make a store "not empty"; an import into an empty store replaces them with the file's
#: (its vectors are what travel, so its record of which model is active must travel with them).
STATE_TABLES = frozenset({schema.embedding_models.name})


def occupied(conn: Connection) -> dict[str, int]:
    """Rows per table of the content tables that hold any."""
    counts = {t.name: int(conn.execute(select(func.count()).select_from(t)).scalar_one())
              for t in TABLES if t.name not in STATE_TABLES}
    return {name: n for name, n in counts.items() if n}


def load(conn: Connection, tables: Mapping[str, Sequence[dict[str, Any]]], *, merge: bool) -> dict[str, Any]:
    """Insert the rows of every table in foreign-key order; ``{"imported": {table: n}, "skipped": {table: n}}``.

    Raises:
        StoreNotEmpty: the store holds rows and ``merge`` is false (nothing was written).
    """
    if not merge:
        held = occupied(conn)
        if held:
            raise StoreNotEmpty(f"the store already holds {sum(held.values())} rows", details={"tables": held})
    imported: dict[str, int] = {}
    skipped: dict[str, int] = {}
    for table in TABLES:
        rows = list(tables.get(table.name, ()))
        if not merge and table.name in STATE_TABLES:
            conn.execute(table.delete())
        if merge:
            fresh = _absent(conn, table, rows)
            skipped[table.name] = len(rows) - len(fresh)
            rows = [{k: v for k, v in row.items() if k != "seq"} for row in fresh]
        for start in range(0, len(rows), CHUNK):
            conn.execute(table.insert(), rows[start:start + CHUNK])
        imported[table.name] = len(rows)
    if not merge:
        # Rows came with their own seq: the next one the store assigns must follow them.
        dialect_for(conn).after_import(conn, [t.name for t in TABLES if "seq" in t.columns])
    dialect_for(conn).after_bulk_insert(conn, [t.name for t in TABLES if imported.get(t.name)])
    return {"imported": imported, "skipped": skipped}


def identity(table: Table) -> list[Column[Any]]:
    """The columns that say whether a row is already in ``table`` (see the module docstring)."""
    if "id" in table.columns:
        return [table.columns["id"]]
    for constraint in table.constraints:
        if isinstance(constraint, UniqueConstraint):
            return list(constraint.columns)
    keys = [c for c in table.primary_key.columns if c.name != "seq"]
    return keys or [c for c in table.columns if c.name != "seq"]


def _absent(conn: Connection, table: Table, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows of ``rows`` whose identity ``table`` does not hold yet (nor an earlier row of ``rows``)."""
    columns = identity(table)

    def key(row: Any) -> str:
        return json.dumps([encode(c, row.get(c.name) if isinstance(row, dict) else row[c.name]) for c in columns],
                          sort_keys=True, default=str)

    seen = {key(row) for row in conn.execute(select(*columns)).mappings()}
    fresh = []
    for row in rows:
        k = key(row)
        if k not in seen:
            seen.add(k)
            fresh.append(row)
    return fresh
