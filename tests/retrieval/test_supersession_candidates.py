"""The SQLite Writer's in-memory supersession candidates: proposals gathered for a whole unit of vectors at
once are the proposals each vector would get on its own, also when the unit retires some of them meanwhile."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from m3.retrieval.supersession import CandidateIndex

MODEL = "m"


def clustered(seed: int, rows: int, dim: int, spread: float) -> np.ndarray:
    """Unit rows around a few centres: many pairs above a high threshold, many ties near it."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(3, dim))
    mat = centres[rng.integers(0, 3, rows)] + spread * rng.normal(size=(rows, dim))
    out: np.ndarray = (mat / np.linalg.norm(mat, axis=1, keepdims=True)).astype(np.float32)
    return out


def row(memory_id: str, owner: int) -> dict[str, Any]:
    return {"id": memory_id, "type": "note", "agent_id": f"a{owner}", "user_id": None}


def filled(mat: np.ndarray, owners: list[int]) -> CandidateIndex:
    index = CandidateIndex(frozenset())
    for i, (vector, owner) in enumerate(zip(mat, owners, strict=True)):
        index.add(MODEL, f"m{i}", ("note", f"a{owner}", None), vector)
    return index


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), rows=st.integers(1, 120), unit=st.integers(1, 40),
       spread=st.sampled_from([0.0, 0.05, 0.3, 1.0]), threshold=st.sampled_from([0.5, 0.9, 0.97, 0.999]),
       discards=st.lists(st.integers(0, 119), max_size=15), groups=st.integers(1, 3))
def test_gathered_proposals_are_the_proposals_of_each_vector_alone_even_as_the_unit_retires_some(
        seed: int, rows: int, unit: int, spread: float, threshold: float, discards: list[int],
        groups: int) -> None:
    mat = clustered(seed, rows, 24, spread)
    owners = [i % groups for i in range(rows)]
    gathered, alone = filled(mat, owners), filled(mat, owners)
    stored = [row(f"m{i}", owners[i]) for i in range(max(0, rows - unit), rows)]  # the unit: the newest rows
    gathered.gather(None, MODEL, 24, stored, threshold)  # type: ignore[arg-type]  # no database is read
    pending = [d % rows for d in discards]
    for i, r in enumerate(stored):
        vector = mat[int(r["id"][1:])]
        found = gathered.near(None, MODEL, r, vector, threshold)  # type: ignore[arg-type]
        assert found == alone.near(None, MODEL, r, vector, threshold)  # type: ignore[arg-type]
        if i < len(pending):  # a rule applied for this vector retired another memory
            gathered.discard(f"m{pending[i]}")
            alone.discard(f"m{pending[i]}")


def test_near_without_gather_still_proposes_every_similar_vector_of_the_owner() -> None:
    mat = clustered(1, 30, 16, 0.0)  # three groups of identical vectors
    index = filled(mat, [0] * 30)
    first = row("m0", 0)
    same = [f"m{i}" for i in range(1, 30) if np.array_equal(mat[i], mat[0])]
    assert sorted(index.near(None, MODEL, first, mat[0], 0.99)) == sorted(same)  # type: ignore[arg-type]
