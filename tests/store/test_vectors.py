"""Stored vectors looked up by memory id, on both stores."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
from sqlalchemy import Engine

from m3.protocols.messages.memory import NewMemory
from m3.store import memories as rows
from m3.store import vectors

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def test_vectors_of_gives_each_asked_memorys_vector_of_the_model_and_skips_the_rest(writer_engine: Engine) -> None:
    ids = [f"00000000-0000-4000-8000-{i:012d}" for i in range(6)]
    rng = np.random.default_rng(7)
    mine, other = rng.standard_normal((6, 8)).astype(np.float32), rng.standard_normal((6, 8)).astype(np.float32)
    with writer_engine.begin() as conn:
        rows.insert_memories(conn, [rows.memory_values(NewMemory(type="note", content=f"v {i}"), memory_id=memory_id,
                                                       digest=rows.content_hash(f"v {i}"), now=NOW)
                                    for i, memory_id in enumerate(ids)])
        vectors.store(conn, "model-a", 8, ids[:4], mine[:4], NOW, dict.fromkeys(ids[:4], False))
        vectors.store(conn, "model-b", 8, ids, other, NOW, dict.fromkeys(ids, False))
        found = vectors.vectors_of(conn, "model-a", [ids[3], ids[0], ids[5], "no-such-memory"])
        assert sorted(found) == sorted([ids[0], ids[3]])  # ids[5] has only model-b's vector
        np.testing.assert_array_equal(found[ids[3]], mine[3])
        np.testing.assert_array_equal(found[ids[0]], mine[0])
        assert vectors.vectors_of(conn, "model-a", []) == {}
