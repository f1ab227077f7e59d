"""A search's query embedding on the helper thread: the vector, and the dense leg's proposals read only after
the Searcher has refreshed the leg."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from m3.embed.minilm import MiniLMEmbedder
from m3.errors import EmbedderUnavailable
from m3.retrieval import query_embedding
from m3.retrieval.dense import MatrixLeg, first_checked
from m3.retrieval.query_embedding import QueryEmbedding

QUERY = "where do we land on Friday?"
WAIT_S = 60.0


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(max_workers=1) as executor:
        yield executor


def test_the_proposals_come_from_the_leg_as_refreshed_after_the_query_started_embedding(
        pool: ThreadPoolExecutor, embedder: MiniLMEmbedder) -> None:
    expected = embedder.embed([QUERY])[0]
    leg = MatrixLeg()
    others = np.random.default_rng(3).standard_normal((20, expected.shape[0])).astype(np.float32)
    leg.index.add([f"m{i}" for i in range(20)], others / np.linalg.norm(others, axis=1, keepdims=True))
    started = QueryEmbedding(pool, embedder, leg, QUERY, 5, False, wait_s=WAIT_S)
    # What the Searcher's thread adds while refreshing must be seen: the helper proposes only afterwards.
    leg.index.add(["same"], expected[None, :])
    started.leg_refreshed(True)
    vector, proposed = started.result(WAIT_S)
    assert np.array_equal(vector, expected)
    assert proposed is not None and proposed[0][0] == "same" and len(proposed) == first_checked(5) == 14
    assert proposed == leg.propose(vector, 5)


def test_a_leg_without_vectors_gives_the_vector_and_no_proposals(
        pool: ThreadPoolExecutor, embedder: MiniLMEmbedder) -> None:
    started = QueryEmbedding(pool, embedder, MatrixLeg(), QUERY, 5, False, wait_s=WAIT_S)
    started.leg_refreshed(False)
    vector, proposed = started.result(WAIT_S)
    assert proposed is None and np.array_equal(vector, embedder.embed([QUERY])[0])


def test_an_embedder_that_cannot_run_raises_from_the_result(pool: ThreadPoolExecutor, tmp_path: Path) -> None:
    broken = MiniLMEmbedder(model_path=tmp_path / "missing.onnx")
    started = QueryEmbedding(pool, broken, MatrixLeg(), QUERY, 5, False, wait_s=WAIT_S)
    started.leg_refreshed(True)
    with pytest.raises(EmbedderUnavailable):
        started.result(WAIT_S)


class Recording:
    """The real embedder, noting when a call has begun."""

    def __init__(self, inner: MiniLMEmbedder):
        self.inner = inner
        self.begun = threading.Event()
        self.model_id, self.dim = inner.model_id, inner.dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.begun.set()
        return self.inner.embed(texts)


def test_the_helper_is_already_on_the_query_when_the_searcher_s_thread_goes_on(
        pool: ThreadPoolExecutor, embedder: MiniLMEmbedder, monkeypatch: pytest.MonkeyPatch) -> None:
    # Without the hand-over the helper would wait for Python's lock while the Searcher's thread runs on.
    # (The bound raised: a loaded test machine may take long to schedule the helper; the search would go on.)
    monkeypatch.setattr(query_embedding, "HANDOVER_WAIT_S", WAIT_S)
    pool.submit(int).result(WAIT_S)  # the helper thread exists and waits for work, as between searches
    recording = Recording(embedder)
    started = QueryEmbedding(pool, recording, MatrixLeg(), QUERY, 5, False, wait_s=WAIT_S)
    assert recording.begun.is_set()
    started.leg_refreshed(False)
    assert np.array_equal(started.result(WAIT_S)[0], embedder.embed([QUERY])[0])


def test_a_busy_helper_does_not_hold_the_search_up(pool: ThreadPoolExecutor, embedder: MiniLMEmbedder) -> None:
    release = threading.Event()
    busy = pool.submit(release.wait, WAIT_S)
    recording = Recording(embedder)
    started = QueryEmbedding(pool, recording, MatrixLeg(), QUERY, 5, False, wait_s=WAIT_S)
    assert not recording.begun.is_set() and not started.done()  # the constructor returned anyway
    release.set()
    started.leg_refreshed(False)
    assert busy.result(WAIT_S) and np.array_equal(started.result(WAIT_S)[0], embedder.embed([QUERY])[0])
