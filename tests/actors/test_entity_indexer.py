"""The EntityIndexer in the background: ticks of an injected ticker index the backlog; no tick, no indexing."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest

from m3.actors.entity_indexer import EntityIndexer, IndexTick, TakeBackground
from m3.actors.supervisor import ActorHandle
from m3.cognition.extraction import Extractor
from m3.protocols.messages.entities import ListEntities
from m3.protocols.messages.memory import Flush, MemoryFilter
from m3.store.engine import StoreOptions
from tests.actors.conftest import WAIT_S, write_one


class HandTicker:
    """A ticker the test fires: ``armed`` is set when the indexer arms it (its backlog is done)."""

    def __init__(self) -> None:
        self.armed = threading.Event()
        self._fire: Callable[[], None] | None = None

    def arm(self, delay_s: float, fire: Callable[[], None]) -> None:
        self._fire = fire
        self.armed.set()

    def cancel(self) -> None:
        self._fire = None

    def fire(self) -> None:
        assert self._fire is not None, "the indexer did not arm its ticker"
        fire, self._fire = self._fire, None
        self.armed.clear()
        fire()


@pytest.fixture
def start_indexer(store_options: StoreOptions) -> Iterator[Callable[..., ActorHandle]]:
    started: list[ActorHandle] = []

    def start(writer: ActorHandle, ticker: HandTicker, *, background: bool, batch: int = 2) -> ActorHandle:
        handle = ActorHandle("entities", EntityIndexer, store_options, writer=writer, extractor=Extractor(),
                             batch=batch, interval_s=60.0, background=background, ask_timeout=WAIT_S,
                             ticker=ticker).start()
        started.append(handle)
        return handle

    yield start
    for handle in started:
        handle.stop(timeout=WAIT_S)


def names(indexer: ActorHandle) -> list[str]:
    found = indexer.ask(ListEntities(filter=MemoryFilter()), WAIT_S)
    return sorted(item.name for item in found.items)


def test_a_tick_indexes_the_whole_backlog_in_batches_then_arms_the_next(
        start_writer: Callable[..., ActorHandle], start_indexer: Callable[..., ActorHandle]) -> None:
    writer, ticker = start_writer(), HandTicker()
    indexer = start_indexer(writer, ticker, background=True)
    assert ticker.armed.wait(WAIT_S)  # the first tick at start found nothing
    for person in ("Alice Smith", "Bob Jones", "Carol White", "Dan Brown", "Erin Moss"):
        writer.ask(write_one(f"We met {person} today.", scope="org"), WAIT_S)
    assert names(indexer) == []  # writes never wait for extraction
    ticker.fire()
    assert ticker.armed.wait(WAIT_S)  # batches of 2 followed each other until one was short
    assert names(indexer) == ["Alice Smith", "Bob Jones", "Carol White", "Dan Brown", "Erin Moss"]


def test_without_the_background_role_ticks_do_nothing_until_it_is_taken(
        start_writer: Callable[..., ActorHandle], start_indexer: Callable[..., ActorHandle]) -> None:
    writer, ticker = start_writer(), HandTicker()
    indexer = start_indexer(writer, ticker, background=False)
    writer.ask(write_one("We met Frank Ocean today.", scope="org"), WAIT_S)
    indexer.tell(IndexTick())
    indexer.ask(Flush(), WAIT_S)
    assert names(indexer) == [] and not ticker.armed.is_set()
    indexer.ask(TakeBackground(), WAIT_S)
    assert ticker.armed.wait(WAIT_S)
    assert names(indexer) == ["Frank Ocean"]
