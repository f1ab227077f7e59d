"""The Embedder actor: deferred vectors, backfill on start, and a broken model that loses nothing."""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from sqlalchemy import func, select

from m3.actors.supervisor import ActorHandle
from m3.actors.system import ActorSystem
from m3.config import Config
from m3.embed.base import MAX_NICE
from m3.embed.minilm import MODEL_ID, MiniLMEmbedder
from m3.protocols.messages.memory import (
    DeleteMemory,
    EmbedderInfo,
    MemoryFilter,
    NewMemory,
    SearchMemories,
    UpdateMemory,
    WriteMemories,
)
from m3.store import schema
from m3.store.engine import StoreOptions
from tests.actors.conftest import WAIT_S, write_one
from tests.stored import fresh

TOPICS = ["database migrations", "holiday planning", "coffee brewing", "bicycle repair", "tax returns",
          "garden irrigation", "piano practice", "kubernetes upgrades", "birthday gifts", "sourdough baking"]


def vector_count(url: str, ids: list[str] | None = None) -> int:
    e = schema.memory_embeddings
    query = select(func.count()).select_from(e).where(e.c.model == MODEL_ID)
    if ids is not None:
        query = query.where(e.c.memory_id.in_(ids))
    with fresh(url) as conn:
        return int(conn.execute(query).scalar_one())


def write_without_embedder(writer: ActorHandle, n: int) -> list[str]:
    return [writer.ask(write_one(f"Notes on {TOPICS[i % len(TOPICS)]}, part {i}.", type="event"), WAIT_S)[0].id
            for i in range(n)]


def test_memories_written_while_no_embedder_ran_get_vectors_on_the_next_start(
        start_writer: Callable[..., ActorHandle], store_options: StoreOptions, config: Config,
        embedder: MiniLMEmbedder) -> None:
    writer = start_writer()
    ids = write_without_embedder(writer, 70)
    writer.stop(timeout=WAIT_S)
    assert vector_count(store_options.url) == 0
    # A small batch makes the backfill page through the store (pages of 16 batches).
    system = ActorSystem(config.with_overrides(embed__max_batch=2), embedder).start()
    try:
        system.wait_embedded(WAIT_S)
        assert vector_count(store_options.url, ids) == 70
        found = system.searcher.ask(SearchMemories(query="How do I fix a flat tyre?", k=1,
                                                   filter=MemoryFilter()), WAIT_S)
        assert "bicycle repair" in found.items[0].content
    finally:
        system.stop()


def test_a_retired_memory_is_not_backfilled(start_writer: Callable[..., ActorHandle], store_options: StoreOptions,
                                            config: Config, embedder: MiniLMEmbedder) -> None:
    writer = start_writer()
    keep, gone = write_without_embedder(writer, 2)
    writer.ask(DeleteMemory(id=gone), WAIT_S)
    writer.stop(timeout=WAIT_S)
    system = ActorSystem(config, embedder).start()
    try:
        system.wait_embedded(WAIT_S)
    finally:
        system.stop()
    assert (vector_count(store_options.url, [keep]), vector_count(store_options.url, [gone])) == (1, 0)


def test_changed_content_gets_a_new_vector(system: ActorSystem, store_url: str) -> None:
    memory_id = system.writer.ask(write_one("The office closes at six."), WAIT_S)[0].id
    system.wait_embedded()
    before = _vector_blob(store_url, memory_id)
    system.writer.ask(UpdateMemory(id=memory_id, changes={"content": "The office closes at nine."}), WAIT_S)
    system.wait_embedded()
    after = _vector_blob(store_url, memory_id)
    assert before != after
    assert vector_count(store_url, [memory_id]) == 1


def _vector_blob(url: str, memory_id: str) -> bytes:
    e = schema.memory_embeddings
    with fresh(url) as conn:
        vector = conn.execute(select(e.c.vector).where(e.c.memory_id == memory_id)).scalar_one()
    return bytes(vector.tobytes())


def test_with_a_broken_model_writes_still_succeed_and_the_next_working_start_fills_the_vectors(
        config: Config, store_options: StoreOptions, embedder: MiniLMEmbedder, tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.CRITICAL, logger="m3.actors")
    broken = MiniLMEmbedder(model_path=tmp_path / "missing.onnx")
    system = ActorSystem(config, broken).start()
    try:
        ids = [system.writer.ask(write_one(f"Reminder number {i} about the quarterly report."), WAIT_S)[0].id
               for i in range(3)]
        system.wait_embedded(WAIT_S)
        info = system.embedder.ask(EmbedderInfo(), WAIT_S)
        assert info["last_error"] and "missing.onnx" in info["last_error"]
        found = system.searcher.ask(SearchMemories(query="quarterly report", k=5, filter=MemoryFilter()), WAIT_S)
        assert {item.id for item in found.items} == set(ids)
    finally:
        system.stop()
    assert vector_count(store_options.url) == 0
    system = ActorSystem(config, embedder).start()
    try:
        system.wait_embedded(WAIT_S)
        assert vector_count(store_options.url, ids) == 3
    finally:
        system.stop()


def test_a_memory_with_the_text_of_one_already_embedded_gets_a_copy_of_its_vector_not_a_model_call(
        system: ActorSystem, store_url: str) -> None:
    first = system.writer.ask(write_one("The office closes at six.", agent_id="alice"), WAIT_S)[0].id
    system.wait_embedded(WAIT_S)
    before = system.embedder.ask(EmbedderInfo(), WAIT_S)
    # Another agent's memory with the same content and title: not a duplicate row, but the same text to embed.
    second = system.writer.ask(write_one("The office closes at six.", agent_id="bob"), WAIT_S)[0].id
    third = system.writer.ask(write_one("The office closes at six.", agent_id="carol", title="Hours"), WAIT_S)[0].id
    system.wait_embedded(WAIT_S)
    after = system.embedder.ask(EmbedderInfo(), WAIT_S)
    assert after["reused"] - before["reused"] == 1  # the titled one embeds another text
    assert after["embedded"] - before["embedded"] == 2
    assert _vector_blob(store_url, second) == _vector_blob(store_url, first)
    assert _vector_blob(store_url, third) != _vector_blob(store_url, first)


class _NiceObserver:
    """The real model, noting the nice value of the OS thread each call runs in (the priority is the behaviour)."""

    def __init__(self, model: MiniLMEmbedder):
        self._model = model
        self.nices: list[int] = []

    @property
    def model_id(self) -> str:
        return self._model.model_id

    @property
    def dim(self) -> int:
        return self._model.dim

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.nices.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
        return self._model.embed(texts)


linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice values are Linux's")


@linux_only
def test_deferred_embeddings_run_at_a_lower_os_priority_while_queries_keep_the_callers(
        config: Config, embedder: MiniLMEmbedder, store_options: StoreOptions) -> None:
    base = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    lowered = min(MAX_NICE, base + 5)
    observed = _NiceObserver(embedder)
    system = ActorSystem(config.with_overrides(embed__nice=5), observed).start()  # type: ignore[arg-type]
    try:
        ids = [system.writer.ask(write_one(f"Notes on {topic}."), WAIT_S)[0].id for topic in TOPICS[:3]]
        system.wait_embedded(WAIT_S)
        assert vector_count(store_options.url, ids) == 3
        assert system.embedder.ask(EmbedderInfo(), WAIT_S)["nice"] == lowered
        assert observed.nices and set(observed.nices) == {lowered}
        observed.nices.clear()
        found = system.searcher.ask(SearchMemories(query="coffee", k=1, filter=MemoryFilter()), WAIT_S)
        assert "coffee brewing" in found.items[0].content
        assert observed.nices == [base]  # the query vector is computed in the Searcher, at its usual priority
    finally:
        system.stop()
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == base


@linux_only
def test_embed_nice_zero_leaves_the_embedding_thread_priority_as_it_was(
        config: Config, embedder: MiniLMEmbedder) -> None:
    base = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    observed = _NiceObserver(embedder)
    system = ActorSystem(config.with_overrides(embed__nice=0), observed).start()  # type: ignore[arg-type]
    try:
        system.writer.ask(write_one("Notes on garden irrigation."), WAIT_S)
        system.wait_embedded(WAIT_S)
        assert system.embedder.ask(EmbedderInfo(), WAIT_S)["nice"] is None
        assert set(observed.nices) == {base}
    finally:
        system.stop()


def test_a_stop_behind_a_large_backlog_comes_after_one_batch_and_the_next_start_embeds_the_rest(
        config: Config, embedder: MiniLMEmbedder, store_url: str) -> None:
    # No settle window: the backlog is embeddable at once, so only the loop's own check can let the stop in.
    quick = config.with_overrides(embed__max_batch=8, embed__settle_ms=0)
    system = ActorSystem(quick, embedder).start()
    # One group commit of 400: the Writer tells the Embedder before it answers, so the stop queues behind them.
    written = system.writer.ask(WriteMemories(actor="test", memories=tuple(
        NewMemory(type="event", content=f"Reading {n} of meter {n % 9} on day {n % 31}.") for n in range(400))),
        WAIT_S)
    ids = [w.id for w in written]
    system.stop(drain_embeddings=False)
    stopped_with = vector_count(store_url, ids)
    assert stopped_with < 100  # not the whole backlog: the stop was handled after a batch or two of 8
    again = ActorSystem(quick, embedder).start()
    try:
        again.wait_embedded(WAIT_S * 4)
        assert vector_count(store_url, ids) == 400
    finally:
        again.stop()
