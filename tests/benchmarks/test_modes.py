"""The baselines measure what they claim: bm25 mode is the FTS5 BM25 order, dense mode the cosine order."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import text

from benchmarks.cache import CachingEmbedder
from benchmarks.data import load_locomo
from benchmarks.ingest import fresh_system, ingest
from benchmarks.modes import SearchModes
from m3.store.engine import open_engine
from m3.store.fulltext import fts5_match, query_terms
from tests.benchmarks.synthetic import write_dev_data
from tests.benchmarks.test_smoke import HashEmbedder

K = 10


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SearchModes, dict, list[str], CachingEmbedder]]:
    conversation = load_locomo(write_dev_data(tmp_path_factory.mktemp("bench-data")))[0]
    embedder = CachingEmbedder(HashEmbedder(), Path(tmp_path_factory.mktemp("cache")) / "c.sqlite")
    with fresh_system(embedder) as system:
        by_id = ingest(system, conversation.turns[:200])
        modes = SearchModes(system)
        try:
            yield modes, by_id, [q.text for q in conversation.questions[:6]], embedder
        finally:
            modes.stop()


def test_dense_mode_is_the_exact_cosine_top_k(store: tuple) -> None:
    modes, by_id, questions, embedder = store
    ids = list(by_id)
    matrix = embedder.embed([by_id[i].content for i in ids])
    for question in questions:
        sims = matrix @ embedder.embed([question])[0]
        expected = [ids[i] for i in np.argsort(-sims, kind="stable")[:K]]
        assert [h.id for h in modes.search("dense", question, K)] == expected


def test_bm25_mode_is_the_fts5_bm25_top_k_and_nothing_else(store: tuple) -> None:
    modes, _by_id, questions, _embedder = store
    engine = open_engine(modes.system.options, "reader")
    try:
        with engine.connect() as conn:
            for question in questions:
                rows = conn.execute(text(
                    "SELECT -bm25(memories_fts, 0.0, 1.0) AS s FROM memories_fts WHERE memories_fts MATCH :q "
                    "ORDER BY s DESC LIMIT :k"), {"q": fts5_match(query_terms(question)), "k": K}).all()
                got = modes.search("bm25", question, K)
                assert [round(h.bm25, 4) for h in got] == [round(max(0.0, r[0]), 4) for r in rows]
                assert all(h.bm25 > 0 for h in got)
    finally:
        engine.dispose()
