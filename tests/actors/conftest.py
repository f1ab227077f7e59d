"""Fixtures for actor tests: a Writer of our own (no Searcher, no Embedder) on a migrated store."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from m3.actors.supervisor import ActorHandle
from m3.actors.writer import Writer
from m3.config import Config
from m3.protocols.messages.memory import NewMemory, WriteMemories
from m3.retrieval.supersession import SupersessionPolicy
from m3.store.engine import StoreOptions, migrate, open_engine

WAIT_S = 30.0


def write_one(content: str, actor: str = "tester", **fields: Any) -> WriteMemories:
    return WriteMemories(memories=(NewMemory(type=fields.pop("type", "note"), content=content, **fields),),
                         actor=actor)


def policy_of(config: Config) -> SupersessionPolicy:
    return SupersessionPolicy(threshold=config["supersede.threshold"],
                              exempt_types=frozenset(config["supersede.exempt_types"]))


@pytest.fixture
def store_options(config: Config) -> StoreOptions:
    options = StoreOptions(url=config.store_url)
    engine = open_engine(options, "writer")
    try:
        migrate(engine)
    finally:
        engine.dispose()
    return options


@pytest.fixture
def start_writer(store_options: StoreOptions, config: Config) -> Iterator[Callable[..., ActorHandle]]:
    """Start a Writer alone (or a subclass of it): memories it writes get no vectors until an Embedder runs."""
    started: list[ActorHandle] = []

    def start(factory: type[Writer] = Writer, max_batch: int = 256, options: StoreOptions | None = None,
              **kwargs: Any) -> ActorHandle:
        handle = ActorHandle("writer", factory, options or store_options, max_batch=max_batch,
                             policy=policy_of(config), searcher=None, embedder=None, **kwargs).start()
        started.append(handle)
        return handle

    yield start
    for handle in started:
        handle.stop(timeout=WAIT_S)
