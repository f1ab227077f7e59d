"""The Writer's operation of the ``files`` tools: replace the chunks of files, inside the caller's transaction.

A file's old chunks are retired (``deleted``, with a history event naming why) and its new chunks inserted in
the same transaction, so a search never sees a file twice or half. Chunks are inserted as they are, never
merged with an identical current memory (two files may hold the same passage; each keeps its path).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from sqlalchemy import Connection, select, update

from m3.protocols.messages.files import FILE_CHUNK, FilesApplied, IndexFiles
from m3.store import memories as rows
from m3.store.schema import memories as m
from m3.store.vectors import embed_text


def apply(conn: Connection, msg: IndexFiles, clock: Callable[[], datetime]
          ) -> tuple[FilesApplied, list[tuple[str, str]], list[str]]:
    """Apply ``msg``; returns its reply, the (id, text) of the new chunks to embed and the ids retired."""
    now = clock()
    retired = _retire(conn, msg, now)
    values, events, fresh = [], [], []
    for chunk in msg.chunks:
        memory_id = rows.new_id()
        values.append(rows.memory_values(chunk, memory_id=memory_id, digest=rows.content_hash(chunk.content),
                                         now=now))
        events.append(rows.event(memory_id, "created", msg.actor, now, type=FILE_CHUNK, path=chunk.source))
        fresh.append((memory_id, embed_text(chunk.title, chunk.content)))
    rows.insert_memories(conn, values)
    rows.record_events(conn, events)
    return FilesApplied(written=len(values), retired=len(retired)), fresh, retired


def _retire(conn: Connection, msg: IndexFiles, now: datetime) -> list[str]:
    """Retire the current chunks of ``msg.retire_paths`` owned by ``msg.agent_id``; their ids."""
    owner = m.c.agent_id.is_(None) if msg.agent_id is None else m.c.agent_id == msg.agent_id
    ids: list[str] = []
    for paths in rows.chunks(sorted(set(msg.retire_paths))):
        # ``type || ''``: the paths find the rows (the source index); SQLite would otherwise take the owner
        # index and read every chunk of the owner, per batch.
        found = conn.execute(select(m.c.id, m.c.source).where(
            m.c.type.concat("") == FILE_CHUNK, owner, m.c.retired_at.is_(None), m.c.source.in_(paths))).all()
        if not found:
            continue
        chosen = [row.id for row in found]
        for part in rows.chunks(chosen):
            conn.execute(update(m).where(m.c.id.in_(part), m.c.retired_at.is_(None))
                         .values(retired_at=now, retire_reason="deleted"))
        rows.record_events(conn, [rows.event(row.id, "deleted", msg.actor, now, reason=msg.reason, path=row.source)
                                  for row in found])
        ids += chosen
    return ids
