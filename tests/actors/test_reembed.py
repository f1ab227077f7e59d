"""Changing the configured model: background re-embedding, search on the previous model meanwhile, then a switch.

The second model is MiniLM truncating at 128 tokens, ``all-MiniLM-L6-v2-int8@128``: a real, different
vector function (every memory longer than 128 tokens gets another vector) that runs here without any
download. Its re-embedding is held at a gate, so "during the re-embedding" is a state the test controls
rather than a race it hopes to win.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Sequence

import numpy as np
import numpy.typing as npt
import pytest
from sqlalchemy import select

from m3.actors.system import ActorSystem
from m3.config import Config
from m3.embed.minilm import MODEL_ID, MiniLMEmbedder
from m3.errors import EmbedderUnavailable
from m3.protocols.messages.memory import EmbedderInfo, EmbeddingStats, MemoryFilter, SearchMemories
from m3.store.schema import memories as m
from m3.store.schema import memory_embeddings as e
from tests.actors.conftest import WAIT_S, write_one
from tests.stored import fresh, is_postgres

NEW_MODEL = f"{MODEL_ID}@128"
TOPICS = {
    "bicycle": "Fixing a flat bicycle tyre: remove the wheel, find the puncture, patch the inner tube.",
    "sourdough": "Feed the sourdough starter twice a day with equal weights of flour and water.",
    "taxes": "The tax return is due at the end of July; receipts are in the grey folder.",
    "deploy": "Deploy keys rotate every Monday; the old key stops working at noon.",
}
# Longer than 128 tokens: its vector differs between the two models.
LONG = ("Irrigation plan for the vegetable garden. " + " ".join(
    f"Bed {i} gets {i % 4 + 1} litres of water at dawn, more when the week is dry and hot." for i in range(30)))


class GatedModel:
    """The real new model, whose calls wait until the test opens the gate (bounded)."""

    def __init__(self, inner: MiniLMEmbedder) -> None:
        self.inner = inner
        self.gate = threading.Event()
        self.entered = threading.Event()

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.entered.set()
        assert self.gate.wait(WAIT_S), "the test never opened the gate"
        return self.inner.embed(texts)


def vectors_of(url: str, model: str) -> dict[str, np.ndarray]:
    with fresh(url) as conn:
        rows = conn.execute(select(e.c.memory_id, e.c.vector).where(e.c.model == model)).all()
    return {row[0]: np.asarray(row[1], dtype=np.float32) for row in rows}


def current_ids(url: str) -> set[str]:
    with fresh(url) as conn:
        return {row[0] for row in conn.execute(select(m.c.id).where(m.c.retired_at.is_(None)))}


def held(url: str, n: int) -> int | None:
    """Vectors the Searcher holds in memory: all of them on SQLite, none between searches on PostgreSQL."""
    return None if is_postgres(url) else n


def search(system: ActorSystem, query: str) -> list[dict[str, object]]:
    found = system.searcher.ask(SearchMemories(query=query, k=3, explain=True, filter=MemoryFilter()), WAIT_S)
    items: list[dict[str, object]] = found.model_dump()["items"]
    return items


@pytest.fixture
def seeded(config: Config, embedder: MiniLMEmbedder) -> dict[str, str]:
    """A store whose memories all have vectors of the default model: topic -> memory id."""
    system = ActorSystem(config, embedder).start()
    try:
        ids = {name: system.writer.ask(write_one(text), WAIT_S)[0].id for name, text in TOPICS.items()}
        ids["long"] = system.writer.ask(write_one(LONG), WAIT_S)[0].id
        system.wait_embedded(WAIT_S)
    finally:
        system.stop()
    return ids


@pytest.fixture
def new_model() -> Iterator[GatedModel]:
    gated = GatedModel(MiniLMEmbedder(max_tokens=128))
    yield gated
    gated.gate.set()


def test_switching_the_model_re_embeds_in_the_background_while_search_keeps_the_previous_model(
        config: Config, store_url: str, seeded: dict[str, str], new_model: GatedModel) -> None:
    system = ActorSystem(config.with_overrides(embed__model=NEW_MODEL), new_model).start()
    try:
        assert new_model.entered.wait(WAIT_S)  # re-embedding has started and is held at the gate
        stats = system.searcher.ask(EmbeddingStats(model=NEW_MODEL), WAIT_S)
        assert stats["models"] == {MODEL_ID: "active", NEW_MODEL: "building"}
        assert stats["pending"] == len(seeded)

        # During it: search answers by meaning with the previous model's vectors only.
        hits = search(system, "how do I repair a punctured wheel")
        assert hits[0]["id"] == seeded["bicycle"]
        explanation = hits[0]["explanation"]
        assert isinstance(explanation, dict)
        assert explanation["dense_model"] == MODEL_ID and explanation["cosine"] > 0.3
        stats = system.searcher.ask(EmbeddingStats(model=NEW_MODEL), WAIT_S)
        assert (stats["search_model"], stats["index_size"]) == (MODEL_ID, held(store_url, len(seeded)))

        # A write during it is acknowledged at once and found by meaning too.
        fresh_id = system.writer.ask(write_one("The spare house key hangs behind the kitchen door."), WAIT_S)[0].id
        hits = search(system, "where can I find a key to get into the home")
        assert hits[0]["id"] == fresh_id

        new_model.gate.set()
        system.wait_embedded(WAIT_S)

        # Afterwards: every current memory has a vector of the new model, and search uses only those.
        stats = system.searcher.ask(EmbeddingStats(model=NEW_MODEL), WAIT_S)
        assert stats["active_model"] == NEW_MODEL and stats["pending"] == 0
        assert stats["models"] == {MODEL_ID: "retired", NEW_MODEL: "active"}
        hits = search(system, "how do I repair a punctured wheel")
        assert hits[0]["id"] == seeded["bicycle"]
        explanation = hits[0]["explanation"]
        assert isinstance(explanation, dict) and explanation["dense_model"] == NEW_MODEL
        stats = system.searcher.ask(EmbeddingStats(model=NEW_MODEL), WAIT_S)
        assert (stats["search_model"], stats["index_size"]) == (NEW_MODEL, held(store_url, len(seeded) + 1))
    finally:
        system.stop()
    new_vectors = vectors_of(store_url, NEW_MODEL)
    assert set(new_vectors) == current_ids(store_url)
    # The memory written during the change got a vector of the previous model as well (search used it).
    assert fresh_id in vectors_of(store_url, MODEL_ID)
    # The new vectors really are the new model's: the long memory's differs from the previous model's.
    old_long = vectors_of(store_url, MODEL_ID)[seeded["long"]]
    np.testing.assert_allclose(new_vectors[seeded["long"]], new_model.inner.embed([LONG])[0], atol=1e-6)
    assert float(new_vectors[seeded["long"]] @ old_long) < 0.999


class FailsAfterOneCall:
    """The real new model, which then stops working (the re-embedding is cut short after one batch)."""

    def __init__(self, inner: MiniLMEmbedder) -> None:
        self.inner = inner
        self.calls = 0

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.calls += 1
        if self.calls > 1:
            raise EmbedderUnavailable("the model went away")
        return self.inner.embed(texts)


def test_a_re_embedding_cut_short_keeps_what_it_stored_and_continues_at_the_next_start(
        config: Config, store_url: str, seeded: dict[str, str], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.CRITICAL, logger="m3.actors.embedder")
    model = MiniLMEmbedder(max_tokens=128)
    system = ActorSystem(config.with_overrides(embed__model=NEW_MODEL, embed__max_batch=2),
                         FailsAfterOneCall(model)).start()
    try:
        system.wait_embedded(WAIT_S)
        stats = system.searcher.ask(EmbeddingStats(model=NEW_MODEL), WAIT_S)
    finally:
        system.stop()
    assert len(vectors_of(store_url, NEW_MODEL)) == 2  # the one batch that worked
    assert (stats["active_model"], stats["pending"]) == (MODEL_ID, len(seeded) - 2)  # search did not switch
    system = ActorSystem(config.with_overrides(embed__model=NEW_MODEL), model).start()
    try:
        system.wait_embedded(WAIT_S)
        stats = system.searcher.ask(EmbeddingStats(model=NEW_MODEL), WAIT_S)
        info = system.embedder.ask(EmbedderInfo(), WAIT_S)
    finally:
        system.stop()
    assert stats["active_model"] == NEW_MODEL and stats["pending"] == 0
    assert info["embedded"] == len(seeded) - 2  # only what was missing
    assert set(vectors_of(store_url, NEW_MODEL)) == current_ids(store_url)


def test_switching_back_reuses_the_vectors_kept_from_before(config: Config, store_url: str,
                                                             seeded: dict[str, str], embedder: MiniLMEmbedder
                                                             ) -> None:
    for model, backend in ((NEW_MODEL, MiniLMEmbedder(max_tokens=128)), (MODEL_ID, embedder)):
        system = ActorSystem(config.with_overrides(embed__model=model), backend).start()
        try:
            system.wait_embedded(WAIT_S)
            stats = system.searcher.ask(EmbeddingStats(model=model), WAIT_S)
        finally:
            system.stop()
        assert stats["active_model"] == model
    assert set(vectors_of(store_url, MODEL_ID)) == current_ids(store_url)


def test_a_fresh_store_makes_the_configured_model_active(config: Config, embedder: MiniLMEmbedder) -> None:
    system = ActorSystem(config, embedder).start()
    try:
        system.writer.ask(write_one("First memory of a new store."), WAIT_S)
        system.wait_embedded(WAIT_S)
        stats = system.searcher.ask(EmbeddingStats(model=MODEL_ID), WAIT_S)
    finally:
        system.stop()
    assert stats["models"] == {MODEL_ID: "active"}


def test_re_embedding_switches_models_even_when_a_question_arrives_during_its_last_batch(
        config: Config, store_url: str, seeded: dict[str, str], new_model: GatedModel) -> None:
    # `m3 embedder reembed` asks for progress while the Embedder works; a question that lands during the
    # last batch must not stop the pass that makes the new model active.
    system = ActorSystem(config.with_overrides(embed__model=NEW_MODEL), new_model).start()
    try:
        assert new_model.entered.wait(WAIT_S)  # the only batch is held at the gate
        system.embedder.tell(EmbedderInfo())  # waits in the mailbox while that batch runs
        new_model.gate.set()
        system.embedder.ask(EmbedderInfo(), WAIT_S)  # answered once the batch is stored
        info = system.embedder.ask(EmbedderInfo(), WAIT_S)  # queued behind what the batch left to do
        stats = system.searcher.ask(EmbeddingStats(model=NEW_MODEL), WAIT_S)
    finally:
        system.stop()
    assert (info["active_model"], info["reembedding"], info["queued"]) == (NEW_MODEL, False, 0)
    assert stats["models"] == {MODEL_ID: "retired", NEW_MODEL: "active"}
