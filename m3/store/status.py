"""What ``m3 store status`` reports about an open store: counts, and its dialect's facts (PostgreSQL: the server)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, func, select

from m3.store import schema, vectors
from m3.store.dialect import dialect_for


def describe(conn: Connection, model: str) -> dict[str, Any]:
    """Counts of memories (current and retired), vectors per model, links, history and chat; server details."""
    m = schema.memories

    def rows_of(table: Any, *where: Any) -> int:
        return int(conn.execute(select(func.count()).select_from(table).where(*where)).scalar_one())

    counts = {
        "memories": rows_of(m),
        "current": rows_of(m, m.c.retired_at.is_(None)),
        "retired": rows_of(m, m.c.retired_at.is_not(None)),
        "vectors_by_model": vectors.counts_by_model(conn),
        "without_vector": vectors.count_missing(conn, model),
        "relationships": rows_of(schema.memory_relationships),
        "history_events": rows_of(schema.memory_history),
        "chat_messages": rows_of(schema.chatlog),
    }
    return {"counts": counts, "embedding_model": model, **dialect_for(conn).status(conn)}
