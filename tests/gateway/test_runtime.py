"""A process's m3: m3's own serving processes settle their heap once started; anything else leaves it alone."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from m3.config import Config
from m3.gateway.runtime import running


@pytest.fixture
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()  # the rest of the test session collects as usual


def test_a_serving_process_settles_its_heap_once_started_and_an_embedding_application_does_not(
        config: Config, unfrozen: None) -> None:
    # An application embedding m3 (m3.integrations' client) runs the background work but owns its heap.
    with running(config, drain_embeddings=False):
        assert gc.get_freeze_count() == 0
    with running(config, background=False, drain_embeddings=False):
        assert gc.get_freeze_count() == 0
    with running(config, background=False, long_lived=True, drain_embeddings=False):
        frozen = gc.get_freeze_count()
        # What the start made is out of a full collection's walk: it sees far fewer objects than were frozen.
        assert frozen > 10_000 and len(gc.get_objects()) < frozen // 10
