"""A search's query embedding on the helper thread: the vector, and the dense leg's proposals read only after
the Searcher has refreshed the leg."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from m3.embed.minilm import MiniLMEmbedder
from m3.errors import EmbedderUnavailable
from m3.retrieval.dense import MatrixLeg
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
    assert proposed is not None and proposed[0][0] == "same" and len(proposed) == 20
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
