"""The native core and its numpy twin return the same results, bit for bit, on random inputs.

Inputs are drawn to be hard: few distinct values (so scores tie), duplicated rows, filters, k above the
number of rows, empty matrices. The tests that compare the two paths need the m3_native extension and are
skipped without it; the rest (the numpy path, the switch) run either way, also with M3_SEARCH_NATIVE=off.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from m3.config import Config, load_config
from m3.errors import ConfigError
from m3.gateway.service import Service
from m3.retrieval import native
from m3.retrieval.vector_index import VectorIndex
from tests.helpers import call

ext = native._EXT
needs_native = pytest.mark.skipif(ext is None, reason="the m3_native extension is not installed")
CHECK = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

#: Few distinct values, exact in binary, so that many dot products tie exactly; plus arbitrary floats.
tie_values = st.sampled_from([-1.0, -0.5, 0.0, 0.25, 0.5, 1.0])
any_values = st.floats(-2.0, 2.0, width=32, allow_subnormal=False)


@st.composite
def cases(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """(matrix, query, candidate rows, n): rows drawn from a few distinct ones, a sorted subset, any n."""
    dim = draw(st.integers(1, 40))
    values = draw(st.sampled_from([tie_values, any_values]))
    distinct = draw(hnp.arrays(np.float32, (draw(st.integers(1, 8)), dim), elements=values))
    picks = draw(st.lists(st.integers(0, len(distinct) - 1), min_size=0, max_size=60))
    mat = np.ascontiguousarray(distinct[picks] if picks else np.zeros((0, dim), np.float32))
    query = draw(hnp.arrays(np.float32, (dim,), elements=values))
    subset = draw(st.lists(st.booleans(), min_size=len(mat), max_size=len(mat)))
    rows = np.flatnonzero(subset).astype(np.int64) if draw(st.booleans()) else np.arange(len(mat), dtype=np.int64)
    return mat, query, rows, draw(st.integers(0, len(mat) + 3))


def norms(mat: np.ndarray) -> np.ndarray:
    return np.linalg.norm(mat, axis=1).astype(np.float32)


def same(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> None:
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1].view(np.int32), b[1].view(np.int32))  # the same bits, not just close


@pytest.fixture
def numpy_path() -> Iterator[None]:
    """The process on the numpy path for one test, then back to what it was."""
    before = dict(native._state)
    native.select("off")
    yield
    native._state.update(before)


# -- the numpy path, on its own ---------------------------------------------------------------------------------

@CHECK
@given(cases())
def test_the_numpy_top_is_the_reference_scores_sorted_best_first_ties_by_row(case: tuple) -> None:
    mat, query, rows, n = case
    found, scores = native.numpy_top_rows(mat, norms(mat), query, n, rows)
    every = native.reference_dot(mat[rows], query) if rows.size else np.zeros(0, np.float32)
    expected = np.lexsort((rows, -every))[:n]
    np.testing.assert_array_equal(found, rows[expected])
    np.testing.assert_array_equal(scores, every[expected])


@CHECK
@given(cases(), st.integers(0, 4), st.sampled_from([-1, 0, 1]))
def test_rows_above_a_threshold_are_every_row_whose_exact_score_exceeds_it_among_few_others(
        case: tuple, pick: int, nudge: int) -> None:
    mat, query, rows, n = case
    live = np.zeros(len(mat), dtype=bool)
    live[rows] = True
    queries = np.stack([query, *mat[:2]]) if len(mat) else query.reshape(1, -1)
    for q in queries:
        exact = native.reference_dot(mat, q) if len(mat) else np.zeros(0, np.float32)
        # The hardest cut: exactly one row's score, or the float next to it on either side.
        score = exact[rows[pick % rows.size]] if rows.size else np.float32(0.5)
        cut = float(np.nextafter(score, np.float32(nudge * np.inf)) if nudge else score)
        found = native.rows_above(mat, norms(mat), q.reshape(1, -1), live, cut)[0]
        assert set(rows[exact[rows] > cut].tolist()) <= set(found.tolist()) <= set(rows.tolist())
        # Ranked, they give the hits above the cut that a top over every live row gives, in the same order.
        every = native.top_rows(mat, norms(mat), q, n, rows)
        among = native.top_rows(mat, norms(mat), q, n, found)
        assert [(int(r), float(s)) for r, s in zip(*every, strict=True) if s > cut] == \
            [(int(r), float(s)) for r, s in zip(*among, strict=True) if s > cut]


def test_equal_scores_come_in_the_order_the_rows_were_added(numpy_path: None) -> None:
    index = VectorIndex()
    same_vector = np.ones((6, 4), dtype=np.float32) / 2
    index.add([f"m{i}" for i in range(6)], same_vector)
    assert [i for i, _ in index.top(same_vector[0], 3)] == ["m0", "m1", "m2"]
    assert [i for i, _ in index.top(same_vector[0], 3, allowed=["m5", "m3", "m4"])] == ["m3", "m4", "m5"]


def test_the_run_s_search_native_reaches_the_configuration(m3_home: Path) -> None:
    # scripts/test's second pass sets M3_SEARCH_NATIVE=off; the fixtures must not clear it.
    expected = os.environ.get("M3_SEARCH_NATIVE", "auto")
    assert load_config()["search.native"] == expected
    if expected == "off":
        assert native.resolve(load_config()["search.native"]) == "numpy"


def test_search_native_accepts_auto_on_off_only() -> None:
    with pytest.raises(ConfigError) as caught:
        native.select("fast")
    assert "auto, on, off" in caught.value.message


def test_search_native_on_without_the_extension_stops_the_start_with_a_config_error(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from m3.actors.system import ActorSystem

    monkeypatch.setattr(native, "_EXT", None)  # as on a machine where `pip install ./native` never ran
    before = dict(native._state)
    try:
        with pytest.raises(ConfigError) as caught:
            ActorSystem(load_config({"M3_HOME": str(tmp_path), "M3_SEARCH_NATIVE": "on"}))
        assert "pip install ./native" in (caught.value.hint or "")
        assert native.select("auto") == "numpy"
        assert native.status() == {"mode": "auto", "path": "numpy", "extension_installed": False}
    finally:
        native._state.update(before)


# -- native against numpy ---------------------------------------------------------------------------------------

@needs_native
@CHECK
@given(cases())
def test_the_reference_dot_is_the_same_bits_natively_and_in_numpy(case: tuple) -> None:
    mat, query, _, _ = case
    np.testing.assert_array_equal(ext.dot_rows(mat, query).view(np.int32),
                                  native.reference_dot(mat, query).view(np.int32))


@needs_native
@CHECK
@given(cases())
def test_the_native_top_equals_the_numpy_top(case: tuple) -> None:
    mat, query, rows, n = case
    if n == 0 or rows.size == 0:
        same(native.top_rows(mat, norms(mat), query, n, rows), native.numpy_top_rows(mat, norms(mat), query, n, rows))
        return
    same(ext.top_f32(mat, query, n, rows), native.numpy_top_rows(mat, norms(mat), query, n, rows))


@needs_native
@settings(max_examples=5, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 40))
def test_a_matrix_large_enough_to_be_scored_on_several_threads_gives_the_same_bits(seed: int, dim: int) -> None:
    # Past 32,768 rows the native scan splits the rows over the cores; the parts must come back in order.
    rng = np.random.default_rng(seed)
    mat = rng.choice(np.array([-1.0, -0.5, 0.0, 0.25, 0.5, 1.0, 0.1, -0.3], np.float32), size=(40_000, dim))
    query = rng.standard_normal(dim).astype(np.float32)
    rows = rng.permutation(40_000)[:35_000].astype(np.int64)
    np.testing.assert_array_equal(ext.dot_rows(mat, query).view(np.int32),
                                  native.reference_dot(mat, query).view(np.int32))
    same(ext.top_f32(mat, query, 500, rows), native.numpy_top_rows(mat, norms(mat), query, 500, rows))


@needs_native
@CHECK
@given(cases())
def test_the_int8_top_equals_the_exact_f32_top(case: tuple) -> None:
    mat, query, rows, n = case
    values, scales, sums = ext.quantise(mat)
    same(ext.top_i8(values, scales, sums, mat, query, n, rows), ext.top_f32(mat, query, n, rows))


@needs_native
@CHECK
@given(cases(), st.integers(0, 12), st.sampled_from([0.0, 0.3, 0.8, 0.999]), st.booleans())
def test_native_mmr_picks_what_numpy_mmr_picks(case: tuple, k: int, lam: float, tied: bool) -> None:
    mat, _, _, _ = case
    scores = np.linspace(1.0, 0.0, len(mat)) if not tied else np.full(len(mat), 0.5)
    assert ext.mmr(mat, scores, k, lam) == native.numpy_mmr_order(mat, scores, k, lam)


@needs_native
def test_the_vector_index_gives_the_same_hits_on_both_paths() -> None:
    rng = np.random.default_rng(3)
    mat = rng.normal(size=(3000, 64)).astype(np.float32)
    mat /= np.linalg.norm(mat, axis=1, keepdims=True)
    mat[1000:1100] = mat[5]  # a hundred exact ties
    ids = [f"m{i}" for i in range(len(mat))]
    index = VectorIndex()
    index.add(ids, mat)
    index.remove(ids[::7])
    before = dict(native._state)
    try:
        for query, allowed in ((mat[5], None), (mat[9], ids[::3]), (mat[5], ids[990:1010])):
            native.select("on")
            on = index.top(query, 120, allowed)
            native.select("off")
            assert index.top(query, 120, allowed) == on
    finally:
        native._state.update(before)


@needs_native
@pytest.mark.parametrize("from_rows", [0, native.INT8_FROM_ROWS])
def test_the_vector_index_scanned_through_its_int8_copy_finds_what_numpy_finds_after_replacements_and_removals(
        monkeypatch: pytest.MonkeyPatch, from_rows: int) -> None:
    monkeypatch.setattr(native, "INT8_FROM_ROWS", from_rows)
    scanned: list[int] = []
    top_i8 = ext.top_i8
    monkeypatch.setattr(ext, "top_i8", lambda *a: scanned.append(len(a[6])) or top_i8(*a))
    rng = np.random.default_rng(5)
    mat = rng.normal(size=(6000, 48)).astype(np.float32)
    mat /= np.linalg.norm(mat, axis=1, keepdims=True)
    queries = rng.normal(size=(3, 48)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    ids = [f"m{i}" for i in range(len(mat))]
    index = VectorIndex(int8_copy=True)
    index.add(ids[:4000], mat[:4000])
    index.add(ids[4000:], mat[4000:])  # the matrix and its copy grow
    # Replaced by the queries themselves: a copy that kept the old rows would leave them out of its shortlist.
    index.add([ids[10], ids[4501], ids[4501]], np.stack([queries[0], mat[0], queries[1]]))
    index.remove(ids[3::9])
    index.hide(ids[1::11])
    index.add([ids[3]], queries[2:3])  # removed, then back with a new vector
    before = dict(native._state)
    try:
        for query, allowed, first in ((queries[0], None, ids[10]), (queries[1], None, ids[4501]),
                                      (queries[2], ids[:4900], ids[3])):
            native.select("on")
            on = index.top(query, 300, allowed)
            native.select("off")
            assert index.top(query, 300, allowed) == on
            assert on[0][0] == first
    finally:
        native._state.update(before)
    assert len(scanned) == 3 and min(scanned) >= from_rows  # every search went through the copy
    plain = VectorIndex()  # the Writer's per-owner indexes keep none
    plain.add(ids, mat)
    plain.top(queries[0], 300)
    assert len(scanned) == 3


@pytest.fixture
def config(env: dict[str, str]) -> Config:
    """The suite's configuration without the access signal: each search counts a read of what it returns,
    which would change the second search's scores whichever path it took."""
    return load_config(env).with_overrides(search__weight_access=0)


@needs_native
def test_memory_search_answers_the_same_on_both_paths(service: Service) -> None:
    words = ["boiler", "key", "garden", "invoice", "train", "dentist"]
    for i in range(40):
        # Repeated sentences: equal vectors, so ties at the cut and in MMR.
        call(service, "memory_write", content=f"The {words[i % 6]} note number {i % 4}.", type="fact")
    service.system.wait_embedded()
    before = dict(native._state)
    try:
        for query, k in (("when is the boiler serviced", 5), ("the note", 20)):
            native.select("on")
            on = call(service, "memory_search", query=query, k=k)
            native.select("off")
            off = call(service, "memory_search", query=query, k=k)
            assert [(i["id"], i["score"]) for i in on["items"]] == [(i["id"], i["score"]) for i in off["items"]]
            assert len(on["items"]) >= 5  # identical writes collapse into fewer memories than written
    finally:
        native._state.update(before)
