"""The embedding cache in front of the real MiniLM model."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from benchmarks.cache import CachingEmbedder, text_key
from m3.embed import Embedder, MiniLMEmbedder
from m3.errors import EmbedderUnavailable, InvalidArgument

TEXTS = [
    "We chose PostgreSQL for our website.",
    "Deploys happen every Tuesday after the standup.",
    "Alice prefers tabs over spaces in Python code.",
    "",
]


class Counting:
    """Wraps an embedder and records every call's texts."""

    def __init__(self, inner: Embedder, model_id: str | None = None):
        self.inner = inner
        self._model_id = model_id or inner.model_id
        self.calls: list[list[str]] = []
        self.lock = threading.Lock()

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        with self.lock:
            self.calls.append(list(texts))
        return self.inner.embed(texts)


class Reversed(Counting):
    """Another "model": the inner vectors reversed, so its vectors differ from MiniLM's."""

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return np.ascontiguousarray(super().embed(texts)[:, ::-1])


@pytest.fixture
def counting(embedder: MiniLMEmbedder) -> Counting:
    return Counting(embedder)


@pytest.fixture
def cache(counting: Counting, tmp_path: Path) -> CachingEmbedder:
    return CachingEmbedder(counting, tmp_path / "cache" / "embeddings.sqlite")


def test_it_is_an_embedder_with_the_inner_model_and_dim(cache: CachingEmbedder, embedder: MiniLMEmbedder) -> None:
    assert isinstance(cache, Embedder)
    assert cache.model_id == embedder.model_id
    assert cache.dim == embedder.dim


def test_output_matches_the_inner_embedder(cache: CachingEmbedder, embedder: MiniLMEmbedder) -> None:
    got = cache.embed(TEXTS)
    assert got.dtype == np.float32 and got.flags["C_CONTIGUOUS"] and got.shape == (len(TEXTS), 384)
    np.testing.assert_allclose(got, embedder.embed(TEXTS), atol=1e-5)


def test_hits_return_identical_vectors_without_calling_the_model(cache: CachingEmbedder,
                                                                  counting: Counting) -> None:
    first = cache.embed(TEXTS)
    second = cache.embed(list(reversed(TEXTS)))
    np.testing.assert_array_equal(second, first[::-1])
    assert len(counting.calls) == 1
    assert cache.stats.hits == len(TEXTS) and cache.stats.misses == len(TEXTS)


def test_misses_are_embedded_once_in_one_call(cache: CachingEmbedder, counting: Counting) -> None:
    cache.embed(TEXTS[:2])
    new = ["A brand new sentence about volcanoes.", "Another new one about tea."]
    got = cache.embed([TEXTS[0], new[0], new[1], new[0], TEXTS[1], new[1]])
    assert counting.calls[1] == new  # only the misses, each distinct text once, one call
    np.testing.assert_array_equal(got[1], got[3])
    np.testing.assert_array_equal(got[2], got[5])
    cache.embed(new)
    assert len(counting.calls) == 2


def test_vectors_survive_a_reopen_of_the_file(counting: Counting, tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    first = CachingEmbedder(counting, path).embed(TEXTS)
    again = CachingEmbedder(counting, path)
    np.testing.assert_array_equal(again.embed(TEXTS), first)
    assert len(counting.calls) == 1
    assert again.count() == len(TEXTS)


def test_two_models_never_mix(embedder: MiniLMEmbedder, tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite"
    mini = CachingEmbedder(Counting(embedder), path)
    other_inner = Reversed(embedder, model_id="other-model")
    other = CachingEmbedder(other_inner, path)
    a = mini.embed(TEXTS)
    b = other.embed(TEXTS)  # same texts, same file: must not be answered with MiniLM's vectors
    assert len(other_inner.calls) == 1
    np.testing.assert_array_equal(b, a[:, ::-1])
    np.testing.assert_array_equal(mini.embed(TEXTS), a)
    np.testing.assert_array_equal(other.embed(TEXTS), b)


def test_a_stored_vector_of_another_dimension_is_a_miss(cache: CachingEmbedder, counting: Counting) -> None:
    cache.embed(TEXTS[:1])
    cache.close()
    conn = sqlite3.connect(cache.path)
    with conn:
        conn.execute("UPDATE embedding_cache SET dim = 3, vector = ?", (np.zeros(3, "<f4").tobytes(),))
    conn.close()
    got = cache.embed(TEXTS[:1])
    assert len(counting.calls) == 2
    assert got.shape == (1, 384)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    cache.embed(TEXTS[:1])  # replaced by the right vector
    assert len(counting.calls) == 2


def test_an_empty_list_needs_no_model(tmp_path: Path) -> None:
    broken = MiniLMEmbedder(model_path=tmp_path / "missing.onnx")
    got = CachingEmbedder(broken, tmp_path / "c.sqlite").embed([])
    assert got.shape == (0, 384) and got.dtype == np.float32


def test_bad_input_is_rejected(cache: CachingEmbedder) -> None:
    with pytest.raises(InvalidArgument):
        cache.embed("hello")
    with pytest.raises(InvalidArgument, match=r"texts\[1\]"):
        cache.embed(["hello", 42])  # type: ignore[list-item]


def test_a_broken_backend_is_reported_and_nothing_is_stored(tmp_path: Path) -> None:
    cache = CachingEmbedder(MiniLMEmbedder(model_path=tmp_path / "missing.onnx"), tmp_path / "c.sqlite")
    with pytest.raises(EmbedderUnavailable):
        cache.embed(["hello"])
    assert cache.count() == 0


def test_an_unusable_cache_file_falls_back_to_the_model(counting: Counting, tmp_path: Path,
                                                        embedder: MiniLMEmbedder) -> None:
    folder = tmp_path / "not-a-file"
    folder.mkdir()
    cache = CachingEmbedder(counting, folder)
    np.testing.assert_allclose(cache.embed(TEXTS), embedder.embed(TEXTS), atol=1e-5)


def test_keys_are_sha256_of_the_utf8_text() -> None:
    assert text_key("abc").hex() == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    assert text_key("\ud800") != text_key("")  # lone surrogates are hashed, not rejected


def test_concurrent_callers_get_the_same_vectors(cache: CachingEmbedder, embedder: MiniLMEmbedder) -> None:
    texts = [f"sentence number {i} about topic {i % 7}" for i in range(60)]
    expected = embedder.embed(texts)
    start = threading.Barrier(4)

    def work(offset: int) -> npt.NDArray[np.float32]:
        start.wait()
        order = texts[offset:] + texts[:offset]
        return np.roll(cache.embed(order), offset, axis=0)

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = [f.result(timeout=120) for f in [pool.submit(work, o) for o in (0, 15, 30, 45)]]
    for result in results:
        np.testing.assert_allclose(result, expected, atol=1e-5)
    assert cache.count() == len(texts)


def test_peek_returns_only_stored_vectors_and_never_embeds(cache: CachingEmbedder, counting: Counting) -> None:
    stored = cache.embed(TEXTS[:2])
    matrix, found = cache.peek([TEXTS[1], "never embedded", TEXTS[0]])
    assert found.tolist() == [True, False, True]
    np.testing.assert_array_equal(matrix[[0, 2]], stored[[1, 0]])
    assert not matrix[1].any()
    assert len(counting.calls) == 1
