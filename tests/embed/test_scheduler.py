"""The embed server's scheduler: interactive requests run ahead of background batches, on the real model."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from m3.embed.minilm import MiniLMEmbedder
from m3.embed.scheduler import Scheduler

WAIT_S = 30.0


class GatedModel:
    """The real model, but each call first waits until the test opens the gate; records every call's texts."""

    def __init__(self, inner: MiniLMEmbedder) -> None:
        self.inner = inner
        self.calls: list[list[str]] = []
        self.entered = threading.Event()
        self.gate = threading.Event()

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.calls.append(list(texts))
        self.entered.set()
        assert self.gate.wait(WAIT_S), "the test never opened the gate"
        return self.inner.embed(texts)


class Answers:
    def __init__(self) -> None:
        self.order: list[str] = []
        self.results: dict[str, Any] = {}
        self.lock = threading.Lock()
        self.all_done = threading.Event()
        self.expected = 0

    def done_for(self, name: str) -> Any:
        def done(matrix: Any, error: BaseException | None) -> None:
            with self.lock:
                self.order.append(name)
                self.results[name] = error if error is not None else matrix
                if len(self.order) == self.expected:
                    self.all_done.set()
        return done


@pytest.fixture
def gated(embedder: MiniLMEmbedder) -> GatedModel:
    return GatedModel(embedder)


def test_an_interactive_request_runs_before_the_rest_of_a_background_batch(gated: GatedModel,
                                                                           embedder: MiniLMEmbedder) -> None:
    scheduler = Scheduler(gated, max_batch=2).start()
    answers = Answers()
    answers.expected = 2
    background = [f"background text number {i}" for i in range(6)]  # three chunks of two
    try:
        scheduler.submit(background, "background", "batcher", answers.done_for("background"))
        assert gated.entered.wait(WAIT_S)  # the first chunk is running
        scheduler.submit(["where is the coffee?"], "interactive", "searcher", answers.done_for("query"))
        gated.gate.set()
        assert answers.all_done.wait(WAIT_S)
    finally:
        scheduler.stop()
    assert gated.calls == [background[0:2], ["where is the coffee?"], background[2:4], background[4:6]]
    assert answers.order == ["query", "background"]
    np.testing.assert_allclose(answers.results["background"], embedder.embed(background), atol=1e-6)


def test_small_interactive_requests_waiting_together_share_one_model_call(gated: GatedModel) -> None:
    scheduler = Scheduler(gated, max_batch=8).start()
    answers = Answers()
    answers.expected = 4
    try:
        scheduler.submit(["first"], "interactive", "a", answers.done_for("first"))
        assert gated.entered.wait(WAIT_S)
        for name in ("second", "third", "fourth"):
            scheduler.submit([name], "interactive", name, answers.done_for(name))
        gated.gate.set()
        assert answers.all_done.wait(WAIT_S)
        stats = scheduler.statistics()
    finally:
        scheduler.stop()
    assert gated.calls == [["first"], ["second", "third", "fourth"]]
    assert stats["model_calls"] == 2
    assert set(stats["clients"]) == {"a", "second", "third", "fourth"}
    for name in ("second", "third", "fourth"):
        assert answers.results[name].shape == (1, 384)


def test_a_failing_model_answers_every_waiting_caller_with_the_error_and_keeps_serving(
        embedder: MiniLMEmbedder) -> None:
    class Flaky:
        model_id, dim = embedder.model_id, embedder.dim
        fail = True

        def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
            if self.fail:
                self.fail = False
                raise RuntimeError("model exploded")
            return embedder.embed(texts)

    scheduler = Scheduler(Flaky(), max_batch=4).start()
    answers = Answers()
    answers.expected = 2
    try:
        scheduler.submit(["a", "b"], "background", "x", answers.done_for("broken"))
        scheduler.submit(["c"], "background", "x", answers.done_for("fine"))
        assert answers.all_done.wait(WAIT_S)
    finally:
        scheduler.stop()
    assert isinstance(answers.results["broken"], RuntimeError)
    assert answers.results["fine"].shape == (1, 384)


def test_stopping_answers_queued_requests_instead_of_leaving_them_waiting(gated: GatedModel) -> None:
    scheduler = Scheduler(gated, max_batch=1).start()
    answers = Answers()
    answers.expected = 2
    scheduler.submit(["running"], "background", "x", answers.done_for("running"))
    assert gated.entered.wait(WAIT_S)
    scheduler.submit(["queued"], "background", "x", answers.done_for("queued"))
    stopper = threading.Thread(target=scheduler.stop)
    stopper.start()
    gated.gate.set()
    stopper.join(WAIT_S)
    assert answers.all_done.wait(WAIT_S)
    assert isinstance(answers.results["queued"], RuntimeError)
