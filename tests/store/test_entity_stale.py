"""The notes of memories the entity pass must read again (``entity_stale``, migration 0017): which changes a
trigger notes, on both stores, and what the migration notes of a store indexed before it."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import Connection, Engine, insert, select, update

from m3.store import migrations
from m3.store.engine import StoreOptions, current_revision, migrate, open_engine
from m3.store.schema import entities, entity_mentions, entity_stale, entity_watermark, memories, memory_history
from tests.store.test_embedding_models import memory_row, upgrade_to

NOW = datetime(2026, 12, 5, tzinfo=UTC)
LATER = datetime(2026, 12, 6, tzinfo=UTC)


def mid(i: int) -> str:
    return str(memory_row(i)["id"])


def noted(conn: Connection) -> list[str]:
    return list(conn.execute(select(entity_stale.c.memory_id).order_by(entity_stale.c.seq)).scalars())


def change(conn: Connection, i: int, **values: object) -> None:
    conn.execute(update(memories).where(memories.c.id == mid(i)).values(**values))


def test_a_change_of_text_retirement_or_restoration_is_noted_and_nothing_else(writer_engine: Engine) -> None:
    with writer_engine.begin() as conn:
        conn.execute(insert(memories), [memory_row(i) for i in range(7)])
        assert noted(conn) == []  # a new memory is the backlog's, not a note's
        change(conn, 0, content="memory 0, edited")
        change(conn, 1, title="a title")
        change(conn, 2, retired_at=NOW, retire_reason="deleted")
        change(conn, 3, access_count=5, last_accessed_at=NOW, importance=0.9, pinned=True)
        change(conn, 4, content="memory 4")  # the same text: nothing changed
        change(conn, 2, retired_at=None, retire_reason=None)
        assert noted(conn) == [mid(0), mid(1), mid(2), mid(2)]


def test_the_migration_notes_what_the_old_sweep_would_still_have_found(empty_store_url: str) -> None:
    engine = open_engine(StoreOptions(url=empty_store_url), "writer")
    try:
        upgrade_to(engine, "0016_lookup_indexes")
        with engine.begin() as conn:
            conn.execute(insert(memories), [memory_row(i) for i in range(6)])
            conn.execute(insert(entities).values(
                id="e1", name="Oslo", norm="oslo", type="name", aliases=[], created_at=NOW, updated_at=NOW,
                scope="agent", agent_id="a", partition="agent|a|"))
            conn.execute(insert(entity_mentions), [
                {"entity_id": "e1", "memory_id": mid(i), "span_start": 0, "span_end": 4, "surface": "Oslo"}
                for i in (0, 1)])
            change(conn, 0, retired_at=NOW)  # retired, mentions left: noted
            change(conn, 2, retired_at=NOW)  # retired, nothing left to drop: not noted
            conn.execute(insert(memory_history), [
                {"memory_id": mid(i), "event": event, "actor": "a", "at": NOW, "details": {}}
                for i, event in ((3, "updated"), (4, "restored"), (1, "pinned"))])
            conn.execute(insert(entity_watermark).values(id=1, seq=5, updated_at=NOW))  # memory 5 not indexed yet
            conn.execute(insert(memory_history).values(memory_id=mid(5), event="updated", actor="a", at=NOW,
                                                       details={}))
        assert migrate(engine) == migrations.HEAD == current_revision(engine)
        with engine.connect() as conn:
            assert noted(conn) == [mid(0), mid(3), mid(4)]
    finally:
        engine.dispose()
