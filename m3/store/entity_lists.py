"""entity_list: visible entities, the most mentioned first, without reading every mention's memory.

An entity's visible mentions (those whose memory the reader may read, :func:`entities.visible_memory`) are at
most all its mentions, which the mention index counts without reading a memory. So the entities most
mentioned in all are counted visibly, more of them each round, until the page's last visible count exceeds
every mention count left out; the page is then exact. Far down the order that bound never closes in, and
every mention is counted with its memory at once, as such a page needs anyway. Ties are ordered by the
normalised name, then the id, compared as Python compares strings (code points, as SQLite does and
PostgreSQL under the C collation), the same on both paths and both stores.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, func, select

from m3.protocols.messages.memory import MemoryFilter
from m3.store.dialect import dialect_for
from m3.store.entities import ENTITY_COLUMNS, visible_memory, visible_mentions, with_aliases
from m3.store.memories import chunks
from m3.store.schema import entities as e
from m3.store.schema import entity_mentions as mn
from m3.store.schema import memories as m

#: Entities counted visibly in the first round beyond the page (at least), each further round four times as
#: many, and the most before every mention is counted at once.
MARGIN = 16
ROUNDS_UP_TO = 20_000


def list_entities(conn: Connection, type_: str | None, limit: int, offset: int, flt: MemoryFilter
                  ) -> list[dict[str, Any]]:
    """Visible entities of ``type_`` (any when None), the most mentioned first, ties by name then id: the
    ``limit`` after the first ``offset``."""
    wanted = offset + limit
    fetch = wanted + max(wanted // 4, MARGIN)
    counts: dict[str, int] | None = None
    while counts is None and fetch <= ROUNDS_UP_TO:
        counts = _bounded(conn, type_, flt, wanted, fetch)
        fetch *= 4
    if counts is None:
        counts = _every_count(conn, type_, flt)
    keys = _names(conn, list(counts))
    order = sorted(counts, key=lambda entity_id: (-counts[entity_id], keys[entity_id], entity_id))
    page = order[offset:wanted]
    rows = _rows(conn, page)
    return with_aliases(conn, [{**rows[entity_id], "n": counts[entity_id]} for entity_id in page], flt)


def _bounded(conn: Connection, type_: str | None, flt: MemoryFilter, wanted: int, fetch: int
             ) -> dict[str, int] | None:
    """The visible counts of every entity that can be among the first ``wanted`` (those at least the
    ``wanted``-th count), from the ``fetch`` most mentioned in all; None when ``fetch`` is too few to tell."""
    most = _most_mentioned(conn, type_, fetch + 1)
    visible = _visible_counts(conn, [entity_id for entity_id, _ in most[:fetch]], flt)
    best = sorted(visible.values(), reverse=True)
    left_out = most[fetch][1] if len(most) > fetch else 0
    if len(most) > fetch and (len(best) < wanted or best[wanted - 1] <= left_out):
        return None
    floor = best[wanted - 1] if len(best) >= wanted else 1
    return {entity_id: n for entity_id, n in visible.items() if n >= floor}


def _most_mentioned(conn: Connection, type_: str | None, limit: int) -> list[tuple[str, int]]:
    """The ``limit`` entities with the most mentions, visible or not, and those counts (the mention index)."""
    q = select(mn.c.entity_id, func.count().label("n")).group_by(mn.c.entity_id)
    if type_ is not None:
        q = q.where(mn.c.entity_id.in_(select(e.c.id).where(e.c.type == type_)))
    return [(row[0], int(row[1])) for row in conn.execute(q.order_by(func.count().desc()).limit(limit))]


def _visible_counts(conn: Connection, ids: Sequence[str], flt: MemoryFilter) -> dict[str, int]:
    """entity id -> its visible mentions, for those of ``ids`` that have any."""
    if not ids:
        return {}
    q = select(e.c.id, visible_mentions(flt)).where(dialect_for(conn).ids_in(e.c.id, ids))
    return {row[0]: int(row[1]) for row in conn.execute(q) if row[1]}


def _every_count(conn: Connection, type_: str | None, flt: MemoryFilter) -> dict[str, int]:
    """entity id -> visible mentions, of every entity with any: each mention of the store with its memory."""
    q = (select(mn.c.entity_id, func.count()).select_from(mn.join(m, m.c.id == mn.c.memory_id))
         .where(visible_memory(flt)).group_by(mn.c.entity_id))
    if type_ is not None:
        q = q.where(mn.c.entity_id.in_(select(e.c.id).where(e.c.type == type_)))
    return {row[0]: int(row[1]) for row in conn.execute(q)}


def _names(conn: Connection, ids: Sequence[str]) -> dict[str, str]:
    """entity id -> normalised name."""
    out: dict[str, str] = {}
    for chunk in chunks(ids):
        q = select(e.c.id, e.c.norm).where(dialect_for(conn).ids_in(e.c.id, chunk))
        out.update((row[0], row[1]) for row in conn.execute(q))
    return out


def _rows(conn: Connection, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """entity id -> its columns and merged names (``merged_aliases``)."""
    if not ids:
        return {}
    q = select(*(e.c[c] for c in ENTITY_COLUMNS), e.c.aliases.label("merged_aliases")).where(
        dialect_for(conn).ids_in(e.c.id, ids))
    return {row["id"]: dict(row) for row in conn.execute(q).mappings()}
