"""Reading the chunks of indexed files (the ``files`` tools): current rows of type ``file_chunk``."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import Connection, and_, select

from m3.protocols.messages.files import FILE_CHUNK, FileChunkRow, ListFileChunks
from m3.store.filters import isolation_clause, source_clause, time_clause
from m3.store.schema import memories as m

_COLUMNS = (m.c.id, m.c.source, m.c.title, m.c.metadata, m.c.scope, m.c.agent_id, m.c.recorded_at)


def list_chunks(conn: Connection, msg: ListFileChunks) -> list[FileChunkRow]:
    """The current chunks ``msg.filter`` sees under ``msg.prefix`` (of ``msg.owner``), by path then position."""
    where = [m.c.type == FILE_CHUNK, time_clause(msg.filter, datetime.now(UTC)), isolation_clause(msg.filter),
             source_clause(msg.prefix)]
    if msg.owner is not None:
        where.append(m.c.agent_id == msg.owner)
    if msg.filter.scope is not None:
        where.append(m.c.scope == msg.filter.scope)
    columns = (*_COLUMNS, m.c.content) if msg.with_content else _COLUMNS
    found = [FileChunkRow(**{"content": None, **row}) for row in
             conn.execute(select(*columns).where(and_(*where)).order_by(m.c.source, m.c.seq)).mappings()]
    return sorted(found, key=lambda row: (row.source, int(row.metadata.get("chunk", 0))))
