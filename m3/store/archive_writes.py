"""Archiving and restoring memories, inside the Writer's transaction.

An archived memory keeps every column and stays current (``retired_at`` is NULL); ``archived_at`` and
``archive_reason`` hide it from default reads (:func:`m3.store.filters.archive_clause`). Archiving re-checks,
at commit time, what the decay pass decided on from its snapshot, so a memory used, pinned or retired since
is left alone; restoring clears both columns (and, for an expired memory, its expiry).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, RowMapping, select, update

from m3.protocols.messages.archive import ArchiveItem, ArchiveMemories, ArchiveResult
from m3.store import id_reads, loop_state
from m3.store import memories as rows
from m3.store.schema import memories as m


def _eligible(row: Mapping[str, Any] | None, item: ArchiveItem, decided_at: datetime) -> bool:
    """Whether ``row`` may still be archived for ``item.reason`` (see the module docstring)."""
    if row is None or row["retired_at"] is not None or row["archived_at"] is not None:
        return False
    if item.reason == "expired":
        return row["expires_at"] is not None and row["expires_at"] <= decided_at
    last_used = row["last_accessed_at"] or row["recorded_at"]
    return not row["pinned"] and last_used <= item.last_used


def archive(conn: Connection, msg: ArchiveMemories, now: datetime) -> ArchiveResult:
    """Archive the items still eligible at ``now`` (one history event each) and move the pass's watermark."""
    found = id_reads.rows_by_ids(conn, [item.id for item in msg.items],
                             columns=(m.c.id, m.c.retired_at, m.c.archived_at, m.c.expires_at, m.c.pinned,
                                      m.c.last_accessed_at, m.c.recorded_at))
    done: list[str] = []
    skipped: list[str] = []
    events: list[dict[str, Any]] = []
    by_reason: dict[str, list[str]] = {}
    for item in msg.items:
        if item.id in done or not _eligible(found.get(item.id), item, msg.at):
            skipped.append(item.id)
            continue
        by_reason.setdefault(item.reason, []).append(item.id)
        done.append(item.id)
        details: dict[str, Any] = {"reason": item.reason, "by": msg.pass_name, "last_used": item.last_used.isoformat()}
        if item.decayed is not None:
            details["decayed_importance"] = round(item.decayed, 6)
        events.append(rows.event(item.id, "archived", msg.actor, now, **details))
    for reason, ids in by_reason.items():
        for chunk in rows.chunks(ids):
            conn.execute(update(m).where(m.c.id.in_(chunk), m.c.archived_at.is_(None))
                         .values(archived_at=now, archive_reason=reason))
    rows.record_events(conn, events)
    loop_state.set_watermark(conn, msg.pass_name, msg.watermark, now)
    return ArchiveResult(archived=tuple(done), skipped=tuple(skipped))


def hidden(row: Mapping[Any, Any], now: datetime) -> bool:
    """Whether default reads leave ``row`` out as archived: archived, or expired (archived by the next pass).
    A row without those columns (one written in this transaction) is not."""
    expires = row.get("expires_at")
    return row.get("archived_at") is not None or (expires is not None and expires <= now)


def unarchive(conn: Connection, row: RowMapping, now: datetime) -> dict[str, Any]:
    """Make archived (or expired) ``row`` visible again; the details its ``restored`` history event records.

    An expired memory loses its expiry (kept in the event): otherwise it would stay hidden and the next pass
    would archive it again. ``memory_update`` can give it a new one.
    """
    values: dict[str, Any] = {"archived_at": None, "archive_reason": None}
    details: dict[str, Any] = {"archived_at": row["archived_at"].isoformat() if row["archived_at"] else None,
                               "archive_reason": row["archive_reason"]}
    expired = row["expires_at"] is not None and row["expires_at"] <= now
    if expired or row["archive_reason"] == "expired":
        values["expires_at"] = None
        details["expires_at"] = row["expires_at"].isoformat() if row["expires_at"] else None
    conn.execute(update(m).where(m.c.id == row["id"]).values(**values))
    return details


def archived_ids(conn: Connection, ids: list[str] | None = None) -> set[str]:
    """The archived memories (among ``ids`` when given): what the Searcher's vector index leaves out."""
    query = select(m.c.id).where(m.c.archived_at.is_not(None))
    if ids is None:
        return set(conn.execute(query).scalars())
    out: set[str] = set()
    for chunk in rows.chunks(ids):
        out.update(conn.execute(query.where(m.c.id.in_(chunk))).scalars())
    return out
