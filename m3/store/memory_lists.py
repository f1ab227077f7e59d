"""Reads that list or count memories without a query: memory_list and memory_stats."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Connection, and_, func, not_, select

from m3.protocols.messages.listing import CountMemories, ListMemories
from m3.protocols.messages.memory import FILE_CHUNK
from m3.protocols.tools.memory_lists import MemoryListResult, MemoryStatsResult
from m3.store import visibility
from m3.store.filters import archive_clause, field_clauses, isolation_clause, time_clause
from m3.store.memories import record
from m3.store.schema import memories as m


def _seen(msg: ListMemories | CountMemories, now: datetime, *, current: bool) -> ColumnElement[bool]:
    """What the reader may see: its isolation and fields, and (``current``) only rows current now. A list naming
    no type leaves out file chunks, as memory_search does (files_list shows the files); counts include them."""
    clauses = [isolation_clause(msg.filter), *field_clauses(msg.filter)]
    if isinstance(msg, ListMemories) and msg.filter.type is None:
        clauses.append(m.c.type != FILE_CHUNK)
    if current:
        clauses.append(time_clause(msg.filter, now))
    return and_(*clauses)


def list_memories(conn: Connection, msg: ListMemories, now: datetime) -> MemoryListResult:
    """A page of the memories the reader sees, newest first (by insertion order, which ``before`` pages on).

    A successor (``superseded_by``) the reader may not see is not named, as in memory_get."""
    where = _seen(msg, now, current=not msg.include_retired)
    if msg.before is not None:
        where = and_(where, m.c.seq < msg.before)
    found = list(conn.execute(select(m).where(where).order_by(m.c.seq.desc()).limit(msg.limit + 1)).mappings())
    page, more = found[:msg.limit], len(found) > msg.limit
    successors = visibility.shown(conn, [row["superseded_by"] for row in page], isolation_clause(msg.filter))
    items = [record(row).model_copy(update={"superseded_by": row["superseded_by"]
                                             if row["superseded_by"] in successors else None}) for row in page]
    return MemoryListResult(count=len(items), items=items, next_before=page[-1]["seq"] if more else None)


def _grouped(conn: Connection, column: Any, where: ColumnElement[bool]) -> dict[str, int]:
    query = select(column, func.count()).where(where).group_by(column).order_by(column)
    return {str(key): int(n) for key, n in conn.execute(query)}


def count_memories(conn: Connection, msg: CountMemories, now: datetime) -> MemoryStatsResult:
    """Counts of what the reader sees; current rows are those current now, neither archived nor expired (those
    are counted as ``archived``)."""
    current = _seen(msg, now, current=True)
    seen = _seen(msg, now, current=False)
    total, pinned, oldest, newest = conn.execute(select(
        func.count(), func.count().filter(m.c.pinned.is_(True)), func.min(m.c.recorded_at), func.max(m.c.recorded_at),
    ).where(current)).one()
    retired = conn.execute(select(func.count()).where(seen, m.c.retired_at.is_not(None))).scalar_one()
    # Current in the bitemporal sense, hidden from default reads: archived, or expired and not archived yet.
    hidden = not_(archive_clause(msg.filter.model_copy(update={"include_archived": False}), now))
    archived = conn.execute(select(func.count()).where(seen, m.c.retired_at.is_(None), hidden)).scalar_one()
    return MemoryStatsResult(
        current=int(total), retired=int(retired), pinned=int(pinned), archived=int(archived),
        by_type=_grouped(conn, m.c.type, current),
        by_scope=_grouped(conn, m.c.scope, current),
        oldest=oldest, newest=newest,
    )
