"""Recording and resolving conflict candidates, inside the Writer's transaction.

Recording a pair adds a ``conflict_detected`` history event to both
memories, so ``memory_history`` says why two look-alike memories both stay
current. Resolving is ``keep_both`` (nothing retired), ``keep_a`` or
``keep_b``: the other memory is closed in favour of the kept one exactly as
an explicit supersession, linked by ``supersedes``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, RowMapping, insert, update

from m3.errors import InvalidArgument
from m3.protocols.messages.memory import MemoryFilter
from m3.store import conflicts as reads
from m3.store import memories as rows
from m3.store.memory_writes import MemoryWrites
from m3.store.schema import conflicts as c

RESOLUTIONS = ("keep_both", "keep_a", "keep_b")


def record_conflict(conn: Connection, older: RowMapping, newer: RowMapping, *, kind: str, reason: str,
                    details: dict[str, Any], similarity: float | None, now: datetime,
                    actor: str | None) -> str | None:
    """Record the pair (``older`` as memory_a) unless it was recorded already; its id, or None."""
    if kind not in reads.KINDS:
        raise InvalidArgument(f"unknown conflict kind {kind!r}", hint=f"One of {list(reads.KINDS)}.")
    if reads.pair_exists(conn, older["id"], newer["id"], kind):
        return None
    conflict_id = str(uuid.uuid4())
    conn.execute(insert(c).values(
        id=conflict_id, memory_a=older["id"], memory_b=newer["id"], kind=kind, reason=reason,
        details=details, similarity=similarity, status="open", resolution=None, detected_at=now,
        resolved_at=None, resolved_by=None, scope=newer["scope"], agent_id=newer["agent_id"],
        user_id=newer["user_id"]))
    rows.record_events(conn, [
        rows.event(mine, "conflict_detected", actor, now, conflict=conflict_id, kind=kind, other=other,
                   reason=reason, cosine=similarity)
        for mine, other in ((older["id"], newer["id"]), (newer["id"], older["id"]))])
    return conflict_id


def resolve_conflict(conn: Connection, conflict_id: str, resolution: str, *, actor: str | None,
                     clock: Callable[[], datetime], flt: MemoryFilter | None = None) -> dict[str, Any]:
    """Resolve an open conflict (visible through ``flt``'s isolation); the conflict as it is now."""
    if resolution not in RESOLUTIONS:
        raise InvalidArgument(f"unknown resolution {resolution!r}", hint=f"One of {list(RESOLUTIONS)}.")
    found = reads.get_conflict(conn, conflict_id, flt)
    if found["status"] != "open":
        raise InvalidArgument(f"conflict {conflict_id} is resolved already ({found['resolution']})",
                              hint="conflicts_list with status=open shows what is left to resolve.")
    now, sides = clock(), (found["memory_a"], found["memory_b"])
    if resolution != "keep_both":
        kept, dropped = sides if resolution == "keep_a" else sides[::-1]
        loser = rows.load(conn, dropped)
        if rows.load(conn, kept)["retired_at"] is not None or loser["retired_at"] is not None:
            raise InvalidArgument(f"a memory of conflict {conflict_id} is retired already",
                                  hint="Resolve it with keep_both; memory_history shows what happened.")
        MemoryWrites(conn, clock).close_superseded(
            loser, kept, now, valid_to=now, actor=actor, reason=f"conflict {conflict_id} resolved {resolution}",
            how="conflict", conflict=conflict_id)
    conn.execute(update(c).where(c.c.id == conflict_id).values(
        status="resolved", resolution=resolution, resolved_at=now, resolved_by=actor))
    rows.record_events(conn, [rows.event(memory_id, "conflict_resolved", actor, now, conflict=conflict_id,
                                         resolution=resolution) for memory_id in sides])
    return reads.get_conflict(conn, conflict_id)
