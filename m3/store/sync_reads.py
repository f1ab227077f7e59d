"""Reads of a node's side of warehouse sync: the next outbox batch with its rows, which parents it holds, status."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import Connection, and_, func, select

from m3.store import schema, sync_state
from m3.store.sync_tables import BY_NAME, SyncTable
from m3.store.sync_writes import CHUNK

_OUTBOX = schema.sync_outbox


def outbox_batch(conn: Connection, node: str, *, after: int, limit: int) -> tuple[list[dict[str, Any]], int]:
    """The next ``limit`` outbox entries past ``after`` as versions to push (``seq``, ``tbl``, ``key``, ``hlc``,
    ``origin``, ``base_hlc``, ``base_origin``, ``deleted``, ``data``), read in the caller's transaction, plus the
    unsent entries of parents they name (sent early, so the warehouse never holds a row before its parent); and the
    seq of the batch's last own entry (``after`` when the outbox holds nothing past it)."""
    entries = [dict(e) for e in conn.execute(select(_OUTBOX).where(_OUTBOX.c.seq > after)
                                             .order_by(_OUTBOX.c.seq).limit(limit)).mappings()]
    if not entries:
        return [], after
    versions = _with_rows(conn, entries, node)
    top = entries[-1]["seq"]
    seen = {(v["tbl"], v["key"]) for v in versions}
    wanted = _parent_keys(versions, seen)
    while wanted:
        early = []
        for tbl, keys in wanted.items():
            for part in _chunks(sorted(keys)):
                early += [dict(e) for e in conn.execute(select(_OUTBOX).where(
                    _OUTBOX.c.tbl == tbl, _OUTBOX.c.key.in_(part), _OUTBOX.c.seq > top)).mappings()]
        fresh = _with_rows(conn, early, node)
        versions += fresh
        seen |= {(v["tbl"], v["key"]) for v in fresh}
        wanted = _parent_keys(fresh, seen)
    return versions, top


def _with_rows(conn: Connection, entries: list[dict[str, Any]], node: str) -> list[dict[str, Any]]:
    by_table: dict[str, list[dict[str, Any]]] = {}
    for entry in entries:
        by_table.setdefault(entry["tbl"], []).append(entry)
    out = []
    for tbl, group in by_table.items():
        spec = BY_NAME[tbl]
        rows = _rows_by_key(conn, spec, group)
        for entry in group:
            row = rows.get(entry["key"])
            out.append({"seq": entry["seq"], "tbl": tbl, "key": entry["key"], "hlc": entry["hlc"], "origin": node,
                        "base_hlc": entry["base_hlc"], "base_origin": entry["base_origin"],
                        "deleted": row is None, "data": spec.encode(row) if row is not None else None})
    out.sort(key=lambda v: v["seq"])
    return out


def _rows_by_key(conn: Connection, spec: SyncTable, entries: list[dict[str, Any]]) -> dict[str, Mapping[Any, Any]]:
    """The current rows of the entries' keys (a hash-named row by its seq, if it still has that key)."""
    t = spec.table
    found: dict[str, Mapping[Any, Any]] = {}
    if spec.kind == "hash":
        seqs = [e["row_seq"] for e in entries if e["row_seq"] is not None]
        for part in _chunks(seqs):
            for row in conn.execute(select(t).where(t.c.seq.in_(part))).mappings():
                found[spec.key_of(row)] = row
        return found
    if len(spec.key_columns) == 1:
        column = spec.key_columns[0]
        for part in _chunks([spec.key_values(e["key"])[column] for e in entries]):
            for row in conn.execute(select(t).where(t.c[column].in_(part))).mappings():
                found[spec.key_of(row)] = row
        return found
    for entry in entries:
        values = spec.key_values(entry["key"])
        one = conn.execute(select(t).where(and_(*(t.c[c] == values[c] for c in spec.key_columns)))).mappings().first()
        if one is not None:
            found[entry["key"]] = one
    return found


def _parent_keys(versions: Iterable[Mapping[str, Any]], seen: set[tuple[str, str]]) -> dict[str, set[str]]:
    wanted: dict[str, set[str]] = {}
    for v in versions:
        if v["deleted"]:
            continue
        for parent in BY_NAME[v["tbl"]].parents:
            value = v["data"].get(parent.column)
            if value is not None and (parent.table, value) not in seen:
                wanted.setdefault(parent.table, set()).add(value)
    return wanted


def missing_parents(conn: Connection, versions: Iterable[Mapping[str, Any]]) -> dict[str, set[str]]:
    """Ids of parent rows the pulled ``versions`` name that neither they nor this store hold."""
    wanted = _parent_keys(versions, {(v["tbl"], v["key"]) for v in versions})
    missing: dict[str, set[str]] = {}
    for tbl, ids in wanted.items():
        t = BY_NAME[tbl].table
        held: set[str] = set()
        for part in _chunks(sorted(ids)):
            held |= {r for (r,) in conn.execute(select(t.c.id).where(t.c.id.in_(part)))}
        if ids - held:
            missing[tbl] = ids - held
    return missing


def status(conn: Connection) -> dict[str, Any]:
    """Node id, whether capture is on, the pull watermark, and what waits to be pushed."""
    changes = conn.execute(select(func.count()).select_from(schema.sync_changes)).scalar_one()
    outbox = conn.execute(select(func.count()).select_from(_OUTBOX)).scalar_one()
    conflicts = conn.execute(select(func.count()).select_from(schema.sync_conflicts)).scalar_one()
    return {"node": sync_state.get(conn, "node"), "capture": bool(sync_state.get(conn, "capture", False)),
            "pulled": int(sync_state.get(conn, "pulled", 0)), "waiting": int(changes) + int(outbox),
            "conflicts": int(conflicts), "clock": int(sync_state.get(conn, "clock", 0))}


def runs(conn: Connection, limit: int) -> list[dict[str, Any]]:
    t = schema.sync_runs
    return [dict(r) for r in conn.execute(select(t).order_by(t.c.seq.desc()).limit(limit)).mappings()]


def conflicts(conn: Connection, limit: int) -> list[dict[str, Any]]:
    t = schema.sync_conflicts
    return [dict(r) for r in conn.execute(select(t).order_by(t.c.seq.desc()).limit(limit)).mappings()]


def _chunks(items: list[Any]) -> Iterable[list[Any]]:
    for start in range(0, len(items), CHUNK):
        yield items[start:start + CHUNK]
