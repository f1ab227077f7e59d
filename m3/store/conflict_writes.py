"""Recording and resolving conflict candidates, inside the Writer's transaction.

Recording a pair adds a ``conflict_detected`` history event to both
memories, so ``memory_history`` says why two look-alike memories both stay
current. A pair is recorded once whatever its kind: a pair flagged as a
``near_duplicate`` is never also a ``contradiction`` or a ``duplicate``
(nor any other way round), open or resolved. Resolving is ``keep_both`` (nothing retired),
``keep_a`` or ``keep_b`` (the other memory is closed in favour of the kept
one exactly as an explicit supersession, linked by ``supersedes``), or
``merge``: a new memory with the given content (the newer side's type,
owner, scope and metadata) supersedes both, so ``as_of`` before the merge
still sees the two.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, RowMapping, insert, select, update

from m3.errors import InvalidArgument
from m3.protocols.messages.conflicts import RecordContradictions
from m3.protocols.messages.memory import MemoryFilter, NewMemory
from m3.store import conflicts as reads
from m3.store import loop_state
from m3.store import memories as rows
from m3.store.memory_writes import MemoryWrites
from m3.store.schema import conflicts as c
from m3.store.schema import memories as m
from m3.store.vectors import embed_text

RESOLUTIONS = ("keep_both", "keep_a", "keep_b", "merge")


def record_conflict(conn: Connection, older: RowMapping, newer: RowMapping, *, kind: str, reason: str,
                    details: dict[str, Any], similarity: float | None, now: datetime,
                    actor: str | None) -> str | None:
    """Record the pair (``older`` as memory_a) unless it was recorded already; its id, or None."""
    if kind not in reads.KINDS:
        raise InvalidArgument(f"unknown conflict kind {kind!r}", hint=f"One of {list(reads.KINDS)}.")
    if reads.pair_exists(conn, older["id"], newer["id"]):
        return None  # of either kind: a pair is one conflict
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


def record_contradictions(conn: Connection, msg: RecordContradictions, now: datetime) -> int:
    """Record the Reflector's pairs (each as its ``kind``: contradiction or duplicate) that still exist and are
    both current (not retired, not archived) and not recorded yet, then move its watermark -- one transaction,
    so a crash loses neither half; how many were recorded. Never refused: a pair that is gone is skipped, so
    the watermark always moves."""
    recorded = 0
    for found in msg.conflicts:
        pair = conn.execute(select(m).where(m.c.id.in_((found.older, found.newer)))).mappings().all()
        if len(pair) != 2 or any(row["retired_at"] is not None or row["archived_at"] is not None for row in pair):
            continue  # erased, retired or archived since the pass read it: no longer a pair of current memories
        older, newer = sorted(pair, key=lambda row: row["id"] != found.older)
        if record_conflict(conn, older, newer, kind=found.kind, reason=found.reason, details=found.details,
                           similarity=found.similarity, now=now, actor=msg.actor) is not None:
            recorded += 1
    loop_state.set_watermark(conn, msg.pass_name, msg.watermark, now)
    return recorded


def _check_arguments(resolution: str, content: str | None, title: str | None) -> None:
    if resolution not in RESOLUTIONS:
        raise InvalidArgument(f"unknown resolution {resolution!r}", hint=f"One of {list(RESOLUTIONS)}.")
    if resolution == "merge" and not (content or "").strip():
        raise InvalidArgument("resolution merge needs the merged memory's content",
                              hint="Give content: the one memory that replaces both sides.")
    if resolution != "merge" and (content is not None or title is not None):
        raise InvalidArgument(f"content and title belong to resolution merge, not {resolution}",
                              hint="Leave them out, or resolve with merge to write a new version of both.")


def resolve_conflict(conn: Connection, conflict_id: str, resolution: str, *, actor: str | None,
                     clock: Callable[[], datetime], flt: MemoryFilter | None = None, content: str | None = None,
                     title: str | None = None, ops: MemoryWrites | None = None) -> dict[str, Any]:
    """Resolve an open conflict (visible through ``flt``'s isolation); the conflict as it is now.

    ``ops`` (the caller's :class:`MemoryWrites`) collects what a merge wrote, for the Writer to embed.
    """
    _check_arguments(resolution, content, title)
    found = reads.get_conflict(conn, conflict_id, flt)
    if found["status"] != "open":
        raise InvalidArgument(f"conflict {conflict_id} is resolved already ({found['resolution']})",
                              hint="conflicts_list with status=open shows what is left to resolve.")
    ops = ops or MemoryWrites(conn, clock)
    now, sides = clock(), (found["memory_a"], found["memory_b"])
    details = found["details"]
    if resolution != "keep_both":
        loaded = [rows.load(conn, memory_id) for memory_id in sides]
        if any(row["retired_at"] is not None for row in loaded):
            raise InvalidArgument(f"a memory of conflict {conflict_id} is retired already",
                                  hint="Resolve it with keep_both; memory_history shows what happened.")
        why = f"conflict {conflict_id} resolved {resolution}"
        if resolution == "merge":
            assert content is not None  # _check_arguments
            merged = _write_merged(conn, ops, loaded, content, title, now, actor, conflict_id)
            for row in loaded:
                ops.close_superseded(row, merged, now, valid_to=now, actor=actor, reason=why, how="conflict",
                                     conflict=conflict_id)
                ops.retired.append(row["id"])
            details = {**details, "merged_into": merged}
        else:
            kept, dropped = loaded if resolution == "keep_a" else loaded[::-1]
            ops.close_superseded(dropped, kept["id"], now, valid_to=now, actor=actor, reason=why, how="conflict",
                                 conflict=conflict_id)
            ops.retired.append(dropped["id"])
    conn.execute(update(c).where(c.c.id == conflict_id).values(
        status="resolved", resolution=resolution, resolved_at=now, resolved_by=actor, details=details))
    rows.record_events(conn, [rows.event(memory_id, "conflict_resolved", actor, now, conflict=conflict_id,
                                         resolution=resolution) for memory_id in sides])
    return reads.get_conflict(conn, conflict_id)


def _write_merged(conn: Connection, ops: MemoryWrites, sides: list[RowMapping], content: str, title: str | None,
                  now: datetime, actor: str | None, conflict_id: str) -> str:
    """Insert the merged memory: the newer side's type, owner, scope and metadata, the more important side's
    importance, pinned if either was; its id."""
    newer = sides[1]
    memory = NewMemory(type=newer["type"], content=content, title=title if title is not None else newer["title"],
                       metadata=dict(newer["metadata"] or {}), scope=newer["scope"], agent_id=newer["agent_id"],
                       user_id=newer["user_id"], importance=max(float(s["importance"]) for s in sides),
                       pinned=any(bool(s["pinned"]) for s in sides), valid_from=now)
    merged = rows.new_id()
    rows.insert_memories(conn, [rows.memory_values(memory, memory_id=merged, digest=rows.content_hash(content),
                                                   now=now)])
    rows.record_events(conn, [rows.event(merged, "created", actor, now, type=memory.type,
                                         supersedes=[s["id"] for s in sides], conflict=conflict_id)])
    ops.fresh.append((merged, embed_text(memory.title, memory.content)))
    return merged
