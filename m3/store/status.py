"""What ``m3 store status`` reports about an open store: counts, and its dialect's facts (PostgreSQL: the server)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, func, inspect, select, text

from m3.store import schema, vectors
from m3.store.dialect import dialect_for


def describe(conn: Connection, model: str) -> dict[str, Any]:
    """Counts of memories (current and retired), vectors per model, links, history, chat, agents and tasks;
    server details."""
    m = schema.memories

    def rows_of(table: Any, *where: Any) -> int:
        return int(conn.execute(select(func.count()).select_from(table).where(*where)).scalar_one())

    counts = {
        "memories": rows_of(m),
        "current": vectors.count_current(conn),
        "retired": rows_of(m, m.c.retired_at.is_not(None)),
        "vectors_by_model": vectors.counts_by_model(conn),
        "without_vector": vectors.count_missing(conn, model),
        "relationships": rows_of(schema.memory_relationships),
        "history_events": rows_of(schema.memory_history),
        "chat_messages": rows_of(schema.chatlog),
        "agents": rows_of(schema.agents),
        "tasks": rows_of(schema.tasks),
    }
    dialect = dialect_for(conn)
    return {"counts": counts, "embedding_model": model, "size_bytes": dialect.size_bytes(conn),
            **dialect.status(conn)}


def revision(conn: Connection) -> str:
    """The schema revision in place on ``conn``, "" before the first migration."""
    row = conn.execute(text("SELECT version_num FROM alembic_version")).first() if inspect(conn).has_table(
        "alembic_version") else None
    return str(row[0]) if row else ""
