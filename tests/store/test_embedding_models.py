"""Which model search uses: the 0002 migration's choice for an existing store, and activation rules."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from alembic import command
from alembic.config import Config as AlembicConfig
from sqlalchemy import Engine, insert, select

from m3.store import embedding_models, migrations
from m3.store.engine import StoreOptions, current_revision, migrate, open_engine
from m3.store.schema import memories, memory_embeddings

NOW = datetime(2026, 11, 30, tzinfo=UTC)


def memory_row(i: int) -> dict[str, object]:
    return {"id": f"00000000-0000-0000-0000-{i:012d}", "type": "note", "content": f"memory {i}", "metadata": {},
            "scope": "agent", "agent_id": "a", "importance": 0.5, "pinned": False, "content_hash": f"{i:064d}",
            "access_count": 0, "valid_from": NOW, "recorded_at": NOW}


def vector_rows(model: str, ids: range, dim: int) -> list[dict[str, object]]:
    return [{"memory_id": f"00000000-0000-0000-0000-{i:012d}", "model": model, "dim": dim,
             "vector": np.ones(dim, dtype=np.float32) / np.sqrt(dim), "created_at": NOW} for i in ids]


def upgrade_to(engine: Engine, revision: str) -> None:
    cfg = AlembicConfig()
    cfg.set_main_option("script_location", str(Path(migrations.__file__).parent))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)


def test_a_store_from_before_0002_keeps_searching_with_the_model_it_has_most_vectors_of(
        empty_store_url: str) -> None:
    engine = open_engine(StoreOptions(url=empty_store_url), "writer")
    try:
        upgrade_to(engine, "0001")
        with engine.begin() as conn:
            conn.execute(insert(memories), [memory_row(i) for i in range(5)])
            conn.execute(insert(memory_embeddings), vector_rows("small-model", range(5), 4))
            conn.execute(insert(memory_embeddings), vector_rows("big-model", range(2), 8))
        assert migrate(engine) == migrations.HEAD == current_revision(engine)
        with engine.connect() as conn:
            assert embedding_models.states(conn) == {"small-model": "active"}
    finally:
        engine.dispose()


def test_a_model_becomes_active_only_when_it_covers_every_current_memory(writer_engine: Engine) -> None:
    with writer_engine.begin() as conn:
        conn.execute(insert(memories), [memory_row(i) for i in range(3)])
        conn.execute(insert(memory_embeddings), vector_rows("old", range(3), 4))
        assert embedding_models.activate(conn, "old", 4, NOW, require_complete=True)
        conn.execute(insert(memory_embeddings), vector_rows("new", range(2), 4))
        embedding_models.mark_building(conn, "new", 4, NOW)
        assert not embedding_models.activate(conn, "new", 4, NOW, require_complete=True)
        assert embedding_models.states(conn) == {"new": "building", "old": "active"}
        conn.execute(insert(memory_embeddings), vector_rows("new", range(2, 3), 4))
        assert embedding_models.activate(conn, "new", 4, NOW, require_complete=True)
        assert embedding_models.states(conn) == {"new": "active", "old": "retired"}
        assert embedding_models.active(conn) == "new"
        embedding_models.mark_building(conn, "new", 4, NOW)  # already active: stays active
        assert embedding_models.active(conn) == "new"


def test_activating_the_active_model_again_rewrites_nothing(writer_engine: Engine) -> None:
    """``updated_at`` is when the state last changed: an engine restarting on an imported store leaves it alone."""
    later = datetime(2026, 12, 1, tzinfo=UTC)
    with writer_engine.begin() as conn:
        assert embedding_models.activate(conn, "m", 4, NOW, require_complete=False)
        assert embedding_models.activate(conn, "m", 4, later, require_complete=False)
        assert [(r.state, r.updated_at) for r in conn.execute(select(embedding_models.t))] == [("active", NOW)]
        assert embedding_models.activate(conn, "m", 8, later, require_complete=False)  # a change is recorded
        assert [(r.state, r.dim, r.updated_at) for r in conn.execute(select(embedding_models.t))] == [
            ("active", 8, later)]
