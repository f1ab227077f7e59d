"""Visibility rules as SQL: time travel, archiving and expiry, filters and isolation.

Every read path builds its WHERE clause here, so that a filter or the
isolation rule cannot be forgotten on one leg of retrieval.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy import BindParameter, ColumnElement, and_, bindparam, exists, func, or_, select, true

from m3.protocols.messages.memory import FILE_CHUNK, MemoryFilter
from m3.store.schema import chatlog as c
from m3.store.schema import memories as m
from m3.store.schema import memory_grants as g
from m3.store.types import UTCDateTime

#: The time a clause counts from: a time, or a parameter read when a statement runs (:func:`now_parameter`).
Now = datetime | BindParameter[datetime]


def now_parameter(read: Callable[[], datetime]) -> BindParameter[datetime]:
    """The current time as a parameter whose value ``read`` gives each time a statement using it runs: a clause
    built on it (and the statements built on that) can be kept and run again later, where a time written into
    the clause would go stale and a new clause per search costs SQLAlchemy's construction and cache key again."""
    return bindparam("m3_now", type_=UTCDateTime(), callable_=read)


def private_rows_clause(scope: ColumnElement[Any], owner: ColumnElement[Any], reader_agent_id: str | None,
                        enforce: bool,
                        *also_visible: ColumnElement[bool]) -> ColumnElement[bool]:
    """The isolation rule for any table of owned rows (``scope`` and ``owner`` columns): with ``enforce``, a
    ``scope=agent`` row only for its own agent (or where ``also_visible`` admits it); everything else to all."""
    if not enforce:
        return true()
    if reader_agent_id is None:
        return scope != "agent"
    return or_(scope != "agent", owner == reader_agent_id, *also_visible)


def isolation_clause(flt: MemoryFilter) -> ColumnElement[bool]:
    """With isolation enforced, ``scope=agent`` rows are visible only to their own agent and to the agents
    their owner shared them with (``memory_grants``, unless ``flt.grants`` is off: changes); ``user`` and
    ``org`` rows to everyone."""
    granted = [exists(select(g.c.seq).where(g.c.memory_id == m.c.id, g.c.agent_id == flt.reader_agent_id))
               ] if flt.grants else []
    return private_rows_clause(m.c.scope, m.c.agent_id, flt.reader_agent_id, flt.enforce_isolation, *granted)


def chat_isolation_clause(flt: MemoryFilter) -> ColumnElement[bool]:
    """The isolation rule of memories, for chat rows: ``scope=agent`` rows only for the agent that wrote them."""
    return private_rows_clause(c.c.scope, c.c.agent_id, flt.reader_agent_id, flt.enforce_isolation)


def time_clause(flt: MemoryFilter, now: Now) -> ColumnElement[bool]:
    """Rows current at ``as_of`` (transaction time), or current now; with ``valid_at``, the rows that held at that
    valid time as the store knew it then (see :func:`valid_clause`). Archived and expired rows are left out
    unless ``flt.include_archived`` (see :func:`archive_clause`)."""
    if flt.valid_at is not None:
        known_at = flt.as_of or now
        return and_(valid_clause(flt.valid_at, known_at), archive_clause(flt, known_at))
    if flt.as_of is not None:
        t = flt.as_of
        return and_(m.c.recorded_at <= t, or_(m.c.retired_at.is_(None), m.c.retired_at > t), archive_clause(flt, t))
    return and_(m.c.retired_at.is_(None), archive_clause(flt, now))


def archive_clause(flt: MemoryFilter, at: Now) -> ColumnElement[bool]:
    """Rows neither archived by ``at`` nor expired at ``at``; everything with ``flt.include_archived``.

    An expired memory counts as archived from the moment it expires: the decay pass only makes that explicit
    (reason ``expired``), so a search sees the same before and after the pass. Archiving is not versioned: a
    memory archived after ``at`` shows in ``as_of=at``; one restored since shows as if never archived
    (``memory_history`` keeps both events).
    """
    if flt.include_archived:
        return true()
    return and_(or_(m.c.archived_at.is_(None), m.c.archived_at > at),
                or_(m.c.expires_at.is_(None), m.c.expires_at > at))


def valid_clause(valid_at: datetime, known_at: Now) -> ColumnElement[bool]:
    """Rows that held in the world at ``valid_at`` by what the store knew at ``known_at``.

    Known at ``known_at``: recorded by then and not yet retired — or retired by a newer fact about the world
    (``superseded`` with a ``valid_to``): that row still says what held during its own period. Rows retired
    as deleted or corrected (``memory_update``) were withdrawn, not outdated, and count no more. Held at
    ``valid_at``: ``valid_from <= valid_at < valid_to`` (an open end holds on). Archiving and expiry are
    :func:`archive_clause`'s.
    """
    known = and_(m.c.recorded_at <= known_at, or_(
        m.c.retired_at.is_(None), m.c.retired_at > known_at,
        and_(m.c.retire_reason == "superseded", m.c.valid_to.is_not(None)),
    ))
    # A row retired after known_at was open-ended then: its valid_to came with the retirement.
    held = and_(m.c.valid_from <= valid_at,
                or_(m.c.valid_to.is_(None), m.c.valid_to > valid_at, m.c.retired_at > known_at))
    return and_(known, held)


FIELDS = ("type", "agent_id", "user_id", "scope", "conversation_id")


def narrows(flt: MemoryFilter) -> bool:
    """Whether ``flt`` restricts by a field: likely to keep a small part of the store (time and isolation do not)."""
    return any(getattr(flt, name) is not None for name in FIELDS)


def field_clauses(flt: MemoryFilter, *, unindexed: frozenset[str] = frozenset()) -> list[ColumnElement[bool]]:
    """The filter's field conditions; those named in ``unindexed`` written ``column || ''`` so that SQLite (no
    statistics) does not choose their index to find the rows (the same rows either way)."""
    return [(m.c[name].concat("") if name in unindexed else m.c[name]) == getattr(flt, name)
            for name in FIELDS if getattr(flt, name) is not None]


def source_clause(prefix: str | None) -> ColumnElement[bool]:
    """Memories whose ``source`` is the path ``prefix`` or lies under it (everything when None or ``/``)."""
    if prefix is None or prefix.rstrip("/") == "":
        return true()
    prefix = prefix.rstrip("/")
    # substr, not LIKE: SQLite's LIKE ignores case, and a path may hold % and _.
    return or_(m.c.source == prefix, func.substr(m.c.source, 1, len(prefix) + 1) == prefix + "/")


def search_clause(flt: MemoryFilter, now: Now, *, by_valid_time: bool = False) -> ColumnElement[bool]:
    """Everything a search may see: time, fields and isolation. A search naming no type leaves out file chunks
    (files_search asks for them by type). ``by_valid_time``: the caller adds a window of valid time, which is
    to find the rows, not the type (the type's index would read every memory of the type)."""
    kinds = [m.c.type != FILE_CHUNK] if flt.type is None else []
    unindexed = frozenset({"type"}) if by_valid_time else frozenset()
    return and_(time_clause(flt, now), isolation_clause(flt), *field_clauses(flt, unindexed=unindexed), *kinds,
                source_clause(flt.source_prefix))
