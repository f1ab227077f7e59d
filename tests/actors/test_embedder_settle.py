"""The Embedder yields to writes: new memories are embedded once writes settle, within a bounded delay."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from m3.actors.system import ActorSystem
from m3.config import Config
from m3.embed.minilm import MiniLMEmbedder
from tests.actors.conftest import WAIT_S, write_one


class _CallClock:
    """The real model, noting when each call starts and how many texts it gets; ``done`` once ``expect`` texts
    have been embedded."""

    def __init__(self, model: MiniLMEmbedder, expect: int):
        self._model = model
        self._expect = expect
        self.calls: list[tuple[float, int]] = []
        self.done = threading.Event()

    @property
    def model_id(self) -> str:
        return self._model.model_id

    @property
    def dim(self) -> int:
        return self._model.dim

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.calls.append((time.monotonic(), len(texts)))
        vectors = self._model.embed(texts)
        if sum(n for _, n in self.calls) >= self._expect:
            self.done.set()
        return vectors


def test_memories_written_in_a_burst_are_embedded_once_the_writes_pause_in_one_model_call(
        config: Config, embedder: MiniLMEmbedder) -> None:
    clock = _CallClock(embedder, expect=3)
    system = ActorSystem(config.with_overrides(embed__settle_ms=400, embed__max_delay_ms=60_000),
                         clock).start()  # type: ignore[arg-type]
    try:
        for topic in ("coffee brewing", "bicycle repair", "tax returns"):
            system.writer.ask(write_one(f"Notes on {topic}."), WAIT_S)
        last_ack = time.monotonic()
        assert clock.done.wait(WAIT_S), "the burst was never embedded"
        started, texts = clock.calls[0]
        # The Embedder heard of the last write before its acknowledgement, so the window ends at most a little
        # before this: never while the writes were still coming.
        assert started >= last_ack + 0.4 - 0.05
        assert texts == 3
    finally:
        system.stop()


def test_under_a_sustained_write_load_a_new_memory_waits_no_longer_than_the_maximum_delay(
        config: Config, embedder: MiniLMEmbedder) -> None:
    clock = _CallClock(embedder, expect=1)
    # A settle window that never ends within the test: only the maximum delay lets the memory through.
    system = ActorSystem(config.with_overrides(embed__settle_ms=600_000, embed__max_delay_ms=300),
                         clock).start()  # type: ignore[arg-type]
    try:
        begun = time.monotonic()
        system.writer.ask(write_one("Notes on sourdough baking."), WAIT_S)
        assert clock.done.wait(WAIT_S), "the memory was never embedded"
        assert clock.calls[0][0] - begun >= 0.3 - 0.05
    finally:
        system.stop()


def test_a_flush_embeds_at_once_whatever_the_settle_window(config: Config, embedder: MiniLMEmbedder) -> None:
    clock = _CallClock(embedder, expect=1)
    system = ActorSystem(config.with_overrides(embed__settle_ms=600_000, embed__max_delay_ms=600_000),
                         clock).start()  # type: ignore[arg-type]
    try:
        system.writer.ask(write_one("Notes on piano practice."), WAIT_S)
        system.wait_embedded(WAIT_S)  # what a one-shot command and the tests do: no window applies
        assert clock.done.is_set()
    finally:
        system.stop()
