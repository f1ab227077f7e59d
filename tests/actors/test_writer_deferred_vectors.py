"""Vectors the Embedder sends are deferred work: acknowledged writes commit first, the vectors soon after."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from m3.actors.supervisor import ActorHandle
from m3.actors.system import ActorSystem
from m3.actors.writer import Writer
from m3.config import Config
from m3.embed.minilm import MiniLMEmbedder
from m3.protocols.messages.memory import Flush, StoreVectors
from m3.store.engine import StoreOptions
from tests.actors.conftest import WAIT_S, write_one
from tests.actors.test_writer import BatchRecordingWriter, send
from tests.actors.test_writer_groups import store_vectors, vector, vectors_of
from tests.stored import is_postgres

HOUR = 3600.0


class SignalsVectorCommits(Writer):
    """The real Writer, setting an event each time a transaction holding vectors commits."""

    def __init__(self, *args: Any, committed: threading.Event, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.committed = committed

    def _commit(self, batch: list[Any]) -> None:
        super()._commit(batch)
        if any(isinstance(env.message, StoreVectors) for env in batch):
            self.committed.set()


def test_a_write_is_acknowledged_before_the_vectors_the_embedder_sent_ahead_of_it_commit(
        start_writer: Callable[..., ActorHandle], store_options: StoreOptions) -> None:
    batches: list[int] = []
    writer = start_writer(BatchRecordingWriter, batches=batches, vector_delay_s=HOUR)
    [a] = writer.ask(write_one("the first memory"), WAIT_S)
    writer.tell(store_vectors([a.id], vector(1, 0, 0, 0)[None]))  # as the Embedder sends it: nobody waits
    [b] = send(writer, write_one("the second memory")).wait(WAIT_S)
    assert b.created
    assert vectors_of(store_options.url) == {}, "the write waited for the vector queued before it"
    assert batches == [1, 1]
    assert writer.ask(Flush(), WAIT_S)
    assert set(vectors_of(store_options.url)) == {a.id}
    assert batches == [1, 1, 1]  # the vector in a transaction of its own


def test_deferred_vectors_commit_by_themselves_soon_after(
        start_writer: Callable[..., ActorHandle], store_options: StoreOptions) -> None:
    committed = threading.Event()
    writer = start_writer(SignalsVectorCommits, committed=committed, vector_delay_s=0.05)
    [a] = writer.ask(write_one("a memory"), WAIT_S)
    writer.tell(store_vectors([a.id], vector(1, 0, 0, 0)[None]))
    assert committed.wait(WAIT_S), "the deferred vector never committed without a Flush"
    assert set(vectors_of(store_options.url)) == {a.id}


def test_vectors_commit_at_once_when_a_full_batch_of_them_waits(
        start_writer: Callable[..., ActorHandle], store_options: StoreOptions) -> None:
    writer = start_writer(max_batch=2, vector_delay_s=HOUR)
    [a] = writer.ask(write_one("one memory"), WAIT_S)
    [b] = writer.ask(write_one("another memory"), WAIT_S)
    writer.tell(store_vectors([a.id, b.id], np.stack([vector(1, 0, 0, 0), vector(0, 1, 0, 0)])))
    writer.ask(write_one("a third memory"), WAIT_S)  # handled after the vectors: no Flush, no timer
    assert set(vectors_of(store_options.url)) == {a.id, b.id}


def test_vectors_someone_waits_for_commit_after_the_deferred_ones_of_the_same_memory(
        start_writer: Callable[..., ActorHandle], store_options: StoreOptions) -> None:
    writer = start_writer(vector_delay_s=HOUR)
    [a] = writer.ask(write_one("a memory"), WAIT_S)
    first, last = vector(1, 0, 0, 0), vector(0, 0, 1, 0)
    writer.tell(store_vectors([a.id], first[None]))
    writer.ask(store_vectors([a.id], last[None]), WAIT_S)
    assert np.allclose(vectors_of(store_options.url)[a.id], last)


def test_vectors_have_a_writer_of_their_own_on_postgresql_only(config: Config, embedder: MiniLMEmbedder) -> None:
    """PostgreSQL's writers run at once (advisory locks order what must be decided once), so the Embedder's
    vectors get a connection of their own; SQLite has one write lock, so they share the Writer's."""
    system = ActorSystem(config, embedder)
    assert (system.vector_writer is not system.writer) == is_postgres(config.store_url)
    assert system.statistics()[1]["actor"] == ("vector_writer" if is_postgres(config.store_url) else "searcher")
