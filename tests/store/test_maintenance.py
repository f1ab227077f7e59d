"""The embedding backlog and the current memories as the store counts them, on both stores."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
from sqlalchemy import Engine, and_, func, select

from m3.protocols.messages.memory import NewMemory
from m3.store import maintenance, vectors
from m3.store import memories as rows
from m3.store.schema import memories as m
from m3.store.schema import memory_embeddings as e

NOW = datetime(2026, 1, 1, tzinfo=UTC)
IDS = [f"00000000-0000-4000-8000-{i:012d}" for i in range(8)]


def test_the_backlog_counts_the_current_memories_without_a_vector_of_each_model(writer_engine: Engine) -> None:
    with writer_engine.begin() as conn:
        rows.insert_memories(conn, [rows.memory_values(NewMemory(type="note", content=f"v {i}"), memory_id=memory_id,
                                                       digest=rows.content_hash(f"v {i}"), now=NOW)
                                    for i, memory_id in enumerate(IDS)])
        rng = np.random.default_rng(3)
        # model-a: five vectors, two of them of memories retired below; model-b: one vector.
        vectors.store(conn, "model-a", 4, IDS[:5], rng.standard_normal((5, 4)).astype(np.float32), NOW,
                      dict.fromkeys(IDS[:5], False))
        vectors.store(conn, "model-b", 4, IDS[7:], rng.standard_normal((1, 4)).astype(np.float32), NOW,
                      dict.fromkeys(IDS[7:], False))
        for memory_id in (IDS[0], IDS[1], IDS[6]):
            rows.retire(conn, memory_id, at=NOW, reason="test")
        current = [IDS[i] for i in (2, 3, 4, 5, 7)]  # model-d: every current memory has one
        vectors.store(conn, "model-d", 4, current, rng.standard_normal((5, 4)).astype(np.float32), NOW,
                      dict.fromkeys(current, False))
        found = {row["model"]: row for row in maintenance.backlog(conn, ["model-a", "model-b", "model-c",
                                                                         "model-d"], 10)}
        for model, row in found.items():
            # The definition, counted row by row.
            waiting = and_(m.c.retired_at.is_(None),
                           ~select(e.c.memory_id).where(e.c.model == model, e.c.memory_id == m.c.id).exists())
            assert row["pending"] == conn.execute(select(func.count()).select_from(m).where(waiting)).scalar_one()
        assert [found[name]["pending"] for name in ("model-a", "model-b", "model-c", "model-d")] == [2, 4, 5, 0]
        assert vectors.count_current(conn) == 5 and vectors.count_missing(conn, "model-a") == 2
        assert found["model-d"]["oldest"] == [] and found["model-d"]["oldest_recorded_at"] is None
        assert [item["id"] for item in found["model-a"]["oldest"]] == [IDS[5], IDS[7]]
        assert found["model-c"]["oldest_recorded_at"] is not None
