"""The Searcher's in-memory vector index: add, replace, remove, top-n, and top-n within an allowed subset."""

from __future__ import annotations

import numpy as np
import pytest

from m3.retrieval.vector_index import VectorIndex


def unit_rows(n: int, dim: int = 16, seed: int = 0) -> np.ndarray:
    m = np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)
    out: np.ndarray = m / np.linalg.norm(m, axis=1, keepdims=True)
    return out


def brute_force(ids: list[str], mat: np.ndarray, query: np.ndarray, n: int) -> list[str]:
    sims = mat @ query
    return [ids[i] for i in np.argsort(-sims, kind="stable")[:n]]


def test_an_empty_index_finds_nothing() -> None:
    index = VectorIndex()
    assert index.top(unit_rows(1)[0], 5) == []
    assert index.top(unit_rows(1)[0], 5, allowed=["a"]) == []
    assert len(index) == 0


def test_top_returns_the_most_similar_ids_with_their_cosine_best_first() -> None:
    mat = unit_rows(50)
    ids = [f"m{i}" for i in range(50)]
    index = VectorIndex()
    index.add(ids, mat)
    query = mat[7]
    found = index.top(query, 5)
    assert [i for i, _ in found] == brute_force(ids, mat, query, 5)
    assert found[0][0] == "m7"
    assert found[0][1] == pytest.approx(1.0, abs=1e-5)
    assert [s for _, s in found] == sorted((s for _, s in found), reverse=True)


def test_asking_for_more_than_stored_returns_everything_once() -> None:
    index = VectorIndex()
    index.add(["a", "b", "c"], unit_rows(3))
    assert sorted(i for i, _ in index.top(unit_rows(1, seed=9)[0], 10)) == ["a", "b", "c"]


def test_adding_an_existing_id_replaces_its_vector() -> None:
    mat = unit_rows(3)
    index = VectorIndex()
    index.add(["a", "b", "c"], mat)
    index.add(["a"], mat[2:3])
    assert len(index) == 3
    np.testing.assert_array_equal(index.vector("a"), mat[2])
    best = index.top(mat[2], 2)
    assert {i for i, _ in best} == {"a", "c"}
    assert all(s == pytest.approx(1.0, abs=1e-5) for _, s in best)


def test_a_removed_id_is_never_returned_and_can_come_back() -> None:
    mat = unit_rows(4)
    index = VectorIndex()
    index.add(["a", "b", "c", "d"], mat)
    index.remove(["a", "unknown"])
    assert len(index) == 3
    assert index.vector("a") is None
    assert "a" not in [i for i, _ in index.top(mat[0], 4)]
    assert "a" not in [i for i, _ in index.top(mat[0], 4, allowed=["a", "b"])]
    index.add(["a"], mat[0:1])
    assert index.top(mat[0], 1)[0][0] == "a"
    assert sorted(i for i, _ in index.top(mat[0], 10)) == ["a", "b", "c", "d"]


def test_top_within_an_allowed_subset_ignores_every_other_id() -> None:
    mat = unit_rows(200)
    ids = [f"m{i}" for i in range(200)]
    index = VectorIndex()
    index.add(ids, mat)
    allowed = [*ids[100:150], "not-indexed"]
    query = mat[3]  # its best matches overall are outside the subset
    found = index.top(query, 5, allowed=allowed)
    assert [i for i, _ in found] == brute_force(ids[100:150], mat[100:150], query, 5)
    assert index.top(query, 5, allowed=[]) == []


def test_the_index_grows_past_its_first_capacity_without_losing_rows() -> None:
    mat = unit_rows(2500, dim=8)
    ids = [f"m{i}" for i in range(2500)]
    index = VectorIndex()
    for start in range(0, 2500, 700):
        index.add(ids[start:start + 700], mat[start:start + 700])
    assert len(index) == 2500
    for probe in (0, 1023, 1024, 2499):
        assert index.top(mat[probe], 1)[0][0] == ids[probe]
        np.testing.assert_array_equal(index.vector(ids[probe]), mat[probe])


def test_a_vector_of_another_dimension_is_refused() -> None:
    index = VectorIndex()
    index.add(["a"], unit_rows(1, dim=8))
    with pytest.raises(ValueError, match="dim"):
        index.add(["b"], unit_rows(1, dim=16))
    assert len(index) == 1


def test_n_of_zero_finds_nothing() -> None:
    index = VectorIndex()
    index.add(["a"], unit_rows(1))
    assert index.top(unit_rows(1)[0], 0) == []


def test_hidden_rows_are_left_out_of_top_unless_asked_and_come_back_when_shown_again() -> None:
    mat = unit_rows(40)
    ids = [f"m{i}" for i in range(40)]
    index = VectorIndex()
    index.add(ids, mat)
    query = mat[3]
    index.hide(["m3", "m9", "unknown"])
    assert index.hidden_count() == 2
    visible = [i for i in ids if i not in ("m3", "m9")]
    found = index.top(query, 5)
    assert [i for i, _ in found] == brute_force(visible, mat[[ids.index(i) for i in visible]], query, 5)
    assert [i for i, _ in index.top(query, 5, include_hidden=True)] == brute_force(ids, mat, query, 5)
    # An explicit subset (the Searcher's narrow-filter path) is ranked as given: its ids passed the SQL clause.
    assert index.top(query, 1, allowed=["m3"])[0][0] == "m3"
    index.hide(["m3", "m9"], hidden=False)
    assert index.hidden_count() == 0
    assert index.top(query, 1)[0][0] == "m3"


def test_a_removed_row_does_not_stay_hidden_when_its_id_comes_back() -> None:
    mat = unit_rows(3)
    index = VectorIndex()
    index.add(["a", "b", "c"], mat)
    index.hide(["a"])
    index.remove(["a"])
    index.add(["a"], mat[:1])
    assert index.hidden_count() == 0
    assert index.top(mat[0], 1)[0][0] == "a"
