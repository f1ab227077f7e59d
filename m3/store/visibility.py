"""Memory ids named inside other records (history events, version chains, task events), shown only where the
reader may see the memory they name, decided in SQL by the isolation clause (the rules per read path are in
docs/coordination.md), so no read path reveals the id of a memory its reader could not open.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import ColumnElement, Connection, RowMapping, true

from m3.store.memories import visible_ids

#: Events that only describe a link: left out altogether when its other end is hidden.
LINK_EVENTS = frozenset({"linked", "unlinked"})
ID_LENGTH = 36


def shown(conn: Connection, ids: Iterable[str | None], visible: ColumnElement[bool]) -> set[str]:
    """Those of ``ids`` that ``visible`` admits."""
    wanted = sorted({i for i in ids if isinstance(i, str)})
    return visible_ids(conn, wanted, visible) if wanted else set()


def _id_keys(details: Any) -> list[str]:
    """The keys of ``details`` whose value may be a memory id (any key: events of every kind name memories
    under their own names — ``to``, ``by``, ``old``, ``other``, ``memory_id`` …)."""
    if not isinstance(details, dict):
        return []
    return [k for k, v in details.items() if isinstance(v, str) and len(v) == ID_LENGTH]


def events(conn: Connection, found: Sequence[RowMapping | dict[str, Any]], visible: ColumnElement[bool]
           ) -> list[dict[str, Any]]:
    """History events (dicts with ``event`` and ``details``) as a reader filtered by ``visible`` may see them:
    a value naming a memory the reader may not see is hidden (ids of other things, tasks or conflicts, stay)."""
    named = [e["details"][k] for e in found for k in _id_keys(e["details"])]
    hidden = shown(conn, named, true()) - shown(conn, named, visible)
    out: list[dict[str, Any]] = []
    for e in found:
        keys = [k for k in _id_keys(e["details"]) if e["details"][k] in hidden]
        if not keys:
            out.append(dict(e))
        elif e["event"] not in LINK_EVENTS:
            out.append({**e, "details": {**e["details"], **dict.fromkeys(keys)}})
    return out


def ids(conn: Connection, chain: Sequence[str], visible: ColumnElement[bool]) -> list[str]:
    """The ids of ``chain`` (a version chain) that ``visible`` admits, in order."""
    admitted = shown(conn, chain, visible)
    return [i for i in chain if i in admitted]


def one(conn: Connection, memory_id: str | None, visible: ColumnElement[bool]) -> str | None:
    """``memory_id`` if ``visible`` admits it, else None."""
    return memory_id if memory_id is not None and memory_id in shown(conn, [memory_id], visible) else None
