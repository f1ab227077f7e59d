"""Reading conflict candidates: pairs of memories that look alike but disagree.

A listing applies the isolation rule in SQL, on the owner columns the pair
carries (both memories of a pair share one owner): with isolation on, a
``scope=agent`` pair is visible only to its agent.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, Connection, and_, or_, select, true

from m3.errors import NotFound
from m3.protocols.messages.conflicts import ListConflicts
from m3.protocols.messages.memory import MemoryFilter
from m3.store.filters import private_rows_clause
from m3.store.memories import without_seq
from m3.store.schema import conflicts as c

KINDS = ("near_duplicate", "contradiction", "duplicate")
#: The fields of ListConflicts that match one column each when set (``status`` too, unless ``all``).
_FIELDS = ("kind", "agent_id", "user_id")


def visible_clause(flt: MemoryFilter) -> ColumnElement[bool]:
    """With isolation enforced, ``scope=agent`` pairs are visible only to their own agent."""
    return private_rows_clause(c.c.scope, c.c.agent_id, flt.reader_agent_id, flt.enforce_isolation)


def _clauses(msg: ListConflicts) -> list[ColumnElement[bool]]:
    clauses = [visible_clause(msg.filter), *(c.c[k] == getattr(msg, k) for k in _FIELDS if getattr(msg, k) is not None)]
    if msg.status != "all":
        clauses.append(c.c.status == msg.status)
    if msg.memory_id is not None:
        clauses.append(or_(c.c.memory_a == msg.memory_id, c.c.memory_b == msg.memory_id))
    return clauses


def list_conflicts(conn: Connection, msg: ListConflicts) -> list[dict[str, Any]]:
    """Conflicts ``msg`` asks for, oldest detected first, at most ``msg.limit``."""
    query = select(c).where(and_(*_clauses(msg))).order_by(c.c.seq).limit(max(1, msg.limit))
    return [_record(row) for row in conn.execute(query).mappings()]


def get_conflict(conn: Connection, conflict_id: str, flt: MemoryFilter | None = None) -> dict[str, Any]:
    """One conflict by id, if ``flt``'s isolation lets its reader see it."""
    where = visible_clause(flt) if flt is not None else true()
    row = conn.execute(select(c).where(c.c.id == conflict_id, where)).mappings().first()
    if row is None:
        raise NotFound(f"no conflict with id {conflict_id!r}", hint="conflicts_list shows the open conflicts.")
    return _record(row)


def _record(row: Any) -> dict[str, Any]:
    """A conflict row as callers see it, with ``merged_into`` (the memory a merge wrote) out of its details."""
    out = without_seq(row)
    out["merged_into"] = (out["details"] or {}).get("merged_into")
    return out


def pair_exists(conn: Connection, memory_a: str, memory_b: str, kind: str | None = None) -> bool:
    """Whether the pair (either order) was recorded already, open or resolved: as ``kind``, or as any kind."""
    found = conn.execute(select(c.c.seq).where(
        c.c.kind == kind if kind is not None else true(),
        or_(and_(c.c.memory_a == memory_a, c.c.memory_b == memory_b),
            and_(c.c.memory_a == memory_b, c.c.memory_b == memory_a))).limit(1)).first()
    return found is not None
