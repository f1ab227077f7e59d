"""Reads that list or count memories without a query: memory_list and memory_stats."""

from __future__ import annotations

from datetime import datetime

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


def count_memories(conn: Connection, msg: CountMemories, now: datetime) -> MemoryStatsResult:
    """Counts of what the reader sees; current rows are those current now, neither archived nor expired (those
    are counted as ``archived``). One pass over the rows the reader sees, grouped by type and scope (a pass
    per figure read the table six times)."""
    current = time_clause(msg.filter, now)
    # Current in the bitemporal sense, hidden from default reads: archived, or expired and not archived yet.
    hidden = and_(m.c.retired_at.is_(None),
                  not_(archive_clause(msg.filter.model_copy(update={"include_archived": False}), now)))
    query = (select(m.c.type, m.c.scope, func.count().filter(current), func.count().filter(and_(current, m.c.pinned)),
                    func.min(m.c.recorded_at).filter(current), func.max(m.c.recorded_at).filter(current),
                    func.count().filter(m.c.retired_at.is_not(None)), func.count().filter(hidden))
             .where(_seen(msg, now, current=False)).group_by(m.c.type, m.c.scope))
    by_type: dict[str, int] = {}
    by_scope: dict[str, int] = {}
    total = pinned = retired = archived = 0
    oldest: datetime | None = None
    newest: datetime | None = None
    for kind, scope, n, n_pinned, first, last, n_retired, n_archived in conn.execute(query):
        total, pinned, retired, archived = total + n, pinned + n_pinned, retired + n_retired, archived + n_archived
        if n:
            by_type[kind] = by_type.get(kind, 0) + n
            by_scope[scope] = by_scope.get(scope, 0) + n
            oldest = first if oldest is None or first < oldest else oldest
            newest = last if newest is None or last > newest else newest
    return MemoryStatsResult(current=total, retired=retired, pinned=pinned, archived=archived,
                             by_type=dict(sorted(by_type.items())), by_scope=dict(sorted(by_scope.items())),
                             oldest=oldest, newest=newest)
