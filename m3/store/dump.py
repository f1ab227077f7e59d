"""A whole store as JSON Lines (admin_export), dialect-neutral: what :mod:`m3.store.dump_writes` reads back.

Every table of :mod:`m3.store.schema` travels, row by row in ``seq`` (primary key) order, tables in foreign-key
order, each value in one JSON form that SQLite and PostgreSQL read back alike: times as ISO 8601 UTC text,
vectors as base64 of their little-endian float32 bytes, JSON columns as JSON, the rest as they are. The
dialect's own derived data (FTS5 tables, ``tsvector`` columns, pgvector indexes) does not travel: the target
rebuilds it (docs/admin.md).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import numpy as np
from sqlalchemy import JSON, Column, Connection, Table, select

from m3.errors import InvalidExport
from m3.store import schema
from m3.store.types import UTCDateTime, VectorType

#: Names the file format; ``FORMAT_VERSION`` changes only when a reader of the old files would misread new ones.
FORMAT = "m3-export"
FORMAT_VERSION = 1
#: Every table that travels, parents before children; a store's warehouse-sync bookkeeping (``sync_*``) names this
#: machine's own place in a sync and stays out (a store made from an export is a new node).
TABLES: tuple[Table, ...] = tuple(t for t in schema.metadata.sorted_tables if not t.name.startswith("sync_"))
#: Rows read per round trip while exporting.
CHUNK = 1000


def table_named(name: str) -> Table | None:
    return schema.metadata.tables.get(name)


def encode(column: Column[Any], value: Any) -> Any:
    """``value`` of ``column`` as JSON (see the module docstring)."""
    if value is None:
        return None
    kind = column.type
    if isinstance(kind, UTCDateTime):
        assert isinstance(value, datetime)
        return value.isoformat()
    if isinstance(kind, VectorType):
        return base64.b64encode(np.asarray(value, dtype="<f4").tobytes()).decode("ascii")
    return value


def decode(column: Column[Any], value: Any) -> Any:
    """The Python value :func:`encode` wrote; ValueError or TypeError when ``value`` is not of that form."""
    if value is None:
        return None
    kind = column.type
    if isinstance(kind, UTCDateTime):
        parsed = datetime.fromisoformat(value)
        if parsed.tzinfo is None:
            raise ValueError(f"{value!r} has no time zone")
        return parsed
    if isinstance(kind, VectorType):
        return np.frombuffer(base64.b64decode(value, validate=True), dtype="<f4").copy()
    if isinstance(kind, JSON):
        return value
    if isinstance(value, dict | list):
        raise TypeError(f"a JSON {type(value).__name__} where a plain value was expected")
    return value


def rows_of(conn: Connection, table: Table) -> Iterator[dict[str, Any]]:
    """Every row of ``table`` in primary-key order, encoded."""
    order = list(table.primary_key.columns)
    result = conn.execution_options(yield_per=CHUNK).execute(select(table).order_by(*order))
    for row in result.mappings():
        yield {c.name: encode(c, row[c.name]) for c in table.columns}


def export_lines(conn: Connection, header: dict[str, Any]) -> tuple[list[str], dict[str, int]]:
    """The header line, then one line per row (``{"table": …, "row": {…}}``) of every table; and rows per table.

    Run inside one read transaction, so the file is one consistent snapshot.
    """
    lines: list[str] = []
    counts: dict[str, int] = {}
    for table in TABLES:
        n = 0
        for row in rows_of(conn, table):
            lines.append(json.dumps({"table": table.name, "row": row}, ensure_ascii=False, separators=(",", ":")))
            n += 1
        counts[table.name] = n
    head = json.dumps({**header, "format": FORMAT, "format_version": FORMAT_VERSION, "tables": counts},
                      separators=(",", ":"))
    return [head, *lines], counts


def parse_lines(lines: Iterator[str]) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]]]:
    """The header and the decoded rows per table of an export; :class:`InvalidExport` (``details.line``) at the
    first line that is not JSON, names no known table or column, or holds a value of the wrong form."""
    header: dict[str, Any] | None = None
    tables: dict[str, list[dict[str, Any]]] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError:
            raise _bad(number, "is not JSON") from None
        if header is None:
            header = _header(item, number)
            continue
        table, row = _entry(item, number)
        tables.setdefault(table.name, []).append(_decoded(table, row, number))
    if header is None:
        raise InvalidExport("the file is empty: no header line", details={"line": 1})
    return header, tables


def _bad(number: int, problem: str) -> InvalidExport:
    return InvalidExport(f"line {number} of the export {problem}", details={"line": number})


def _header(item: Any, number: int) -> dict[str, Any]:
    if not isinstance(item, dict) or item.get("format") != FORMAT:
        raise _bad(number, f"is not an {FORMAT} header (the first line must name format {FORMAT!r})")
    if item.get("format_version") != FORMAT_VERSION or not isinstance(item.get("revision"), str):
        raise _bad(number, f"has format_version {item.get('format_version')!r} or no revision; this m3 reads "
                           f"version {FORMAT_VERSION}")
    return item


def _entry(item: Any, number: int) -> tuple[Table, dict[str, Any]]:
    if not isinstance(item, dict) or not isinstance(item.get("row"), dict):
        raise _bad(number, 'is not a row ({"table": …, "row": {…}})')
    table = table_named(str(item.get("table")))
    if table is None:
        raise _bad(number, f"names no table of the store ({item.get('table')!r})")
    unknown = sorted(set(item["row"]) - set(table.columns.keys()))
    if unknown:
        raise _bad(number, f"has columns {table.name} does not have: {', '.join(unknown)}")
    missing = sorted(c.name for c in table.columns if not c.nullable and c.server_default is None
                     and c.name not in item["row"] and not (c.primary_key and c.autoincrement is True))
    if missing:
        raise _bad(number, f"lacks columns {table.name} requires: {', '.join(missing)}")
    return table, item["row"]


def _decoded(table: Table, row: dict[str, Any], number: int) -> dict[str, Any]:
    try:
        return {name: decode(table.columns[name], value) for name, value in row.items()}
    except (ValueError, TypeError) as exc:
        raise _bad(number, f"holds a value {table.name} cannot take: {exc}") from None
