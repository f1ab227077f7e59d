"""The Writer's side of belief roll-up: commit a tick's beliefs with the pass's watermark, and undo a belief.

Both run inside the Writer's transaction. A belief is a new memory (type ``belief``) of its sources' owner,
linked ``consolidates`` to each source; the sources are never changed. A new version of a belief supersedes
the previous one like any correction (history and ``as_of`` keep it). The undo retires the belief — soft, with
an ``unconsolidated`` history event naming its sources — and removes its links; nothing is erased.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, select

from m3.errors import InvalidArgument, NotASummary
from m3.protocols.messages.memory import NewMemory
from m3.protocols.messages.rollup import (
    BELIEF,
    CONSOLIDATES,
    UNCONSOLIDATED,
    CommitRollup,
    NewBelief,
    RollupWritten,
    UnconsolidateMemory,
)
from m3.protocols.tools.consolidation import MemoryUnconsolidateResult
from m3.store import loop_state
from m3.store import memories as rows
from m3.store.memory_writes import MemoryWrites
from m3.store.schema import memories as m
from m3.store.schema import memory_relationships as r
from m3.store.vectors import embed_text

#: Where a roll-up belief keeps how it was made (its sources and method) in its metadata.
METADATA_KEY = "rollup"

Fresh = list[tuple[str, str]]


def is_summary(row: Any) -> bool:
    """Whether a memory row is a belief written by the roll-up pass."""
    return bool(row["type"] == BELIEF and isinstance(row["metadata"], dict) and METADATA_KEY in row["metadata"])


def commit(conn: Connection, msg: CommitRollup, clock: Callable[[], datetime]) -> tuple[RollupWritten, Fresh,
                                                                                       list[str]]:
    """Write the beliefs that still hold, then move the watermark: (what was written, (id, text) to embed, ids
    retired). A belief is left out when one of its sources, or the belief it replaces, is no longer current
    (changed since the pass read them): the change gives the owner a new vector, so the next tick looks again."""
    ops = MemoryWrites(conn, clock)
    created: list[str] = []
    superseded: list[str] = []
    fresh: Fresh = []
    skipped = 0
    for belief in msg.beliefs:
        new_id = _write(conn, ops, belief, msg.actor)
        if new_id is None:
            skipped += 1
            continue
        created.append(new_id)
        fresh.append((new_id, embed_text(belief.title, belief.content)))
        if belief.replaces is not None:
            superseded.append(belief.replaces)
    loop_state.set_watermark(conn, msg.name, msg.watermark, clock())
    return RollupWritten(created=tuple(created), superseded=tuple(superseded), skipped=skipped), fresh, superseded


def _write(conn: Connection, ops: MemoryWrites, belief: NewBelief, actor: str) -> str | None:
    """Insert one belief and its links (and supersede the belief it replaces); None when it no longer holds."""
    wanted = [*belief.sources, *([belief.replaces] if belief.replaces else [])]
    if rows.visible_ids(conn, wanted, m.c.retired_at.is_(None)) != set(wanted):
        return None
    now = ops.clock()
    metadata = {**belief.metadata, METADATA_KEY: {"sources": list(belief.sources), "method": belief.method}}
    memory = NewMemory(type=BELIEF, content=belief.content, title=belief.title, metadata=metadata,
                       scope=belief.scope, agent_id=belief.agent_id, user_id=belief.user_id,
                       importance=belief.importance, valid_from=now)
    new_id = rows.new_id()
    rows.insert_memories(conn, [rows.memory_values(memory, memory_id=new_id, digest=rows.content_hash(memory.content),
                                                   now=now)])
    for source in belief.sources:
        rows.link(conn, new_id, source, CONSOLIDATES, at=now, actor=actor)
    rows.record_events(conn, [rows.event(new_id, "created", actor, now, type=BELIEF, sources=list(belief.sources),
                                         method=belief.method, replaces=belief.replaces)])
    if belief.replaces is not None:
        old = rows.load(conn, belief.replaces)
        ops.close_superseded(old, new_id, now, valid_to=now, actor=actor, how="rollup",
                             reason="more related notes joined the cluster")
    return new_id


def _sources_of(conn: Connection, belief_id: str) -> list[str]:
    query = select(r.c.to_id).where(r.c.from_id == belief_id, r.c.type == CONSOLIDATES).order_by(r.c.seq)
    return [row[0] for row in conn.execute(query)]


def unconsolidate(conn: Connection, msg: UnconsolidateMemory,
                  clock: Callable[[], datetime]) -> tuple[MemoryUnconsolidateResult, list[str]]:
    """Retire roll-up belief ``msg.id`` and remove its ``consolidates`` links: (the result, ids retired).

    Only the belief's owner may (a private belief is not found for another agent, as for any change). Refused
    with ``not_a_summary`` for any other memory, ``invalid_argument`` for a belief already retired."""
    flt = msg.filter
    if flt.reader_agent_id is not None:  # as MemoryWrites: changes need ownership, never a grant
        flt = flt.model_copy(update={"enforce_isolation": True, "grants": False})
    row = rows.load(conn, rows.resolve_id(conn, msg.id, flt))
    if not is_summary(row):
        raise NotASummary(f"memory {row['id']} is a {row['type']}, not a belief written by the roll-up",
                          details={"id": row["id"], "type": row["type"]})
    if row["retired_at"] is not None:
        raise InvalidArgument(f"belief {row['id']} is already retired ({row['retire_reason']})",
                              hint="Unconsolidate its current version; memory_history lists the chain.",
                              details={"superseded_by": row["superseded_by"]})
    now = clock()
    sources = _sources_of(conn, row["id"])
    rows.retire(conn, row["id"], at=now, reason=UNCONSOLIDATED, valid_to=now)
    for source in sources:
        rows.unlink(conn, row["id"], source, CONSOLIDATES)
    # The sources are named in history: the links are gone, the record of what the belief summarised is not.
    rows.record_events(conn, [rows.event(row["id"], UNCONSOLIDATED, msg.actor, now, sources=sources,
                                         reason=msg.reason, allow_again=msg.allow_again)])
    result = MemoryUnconsolidateResult(id=row["id"], sources=sources, retired_at=now, allow_again=msg.allow_again)
    return result, [row["id"]]
