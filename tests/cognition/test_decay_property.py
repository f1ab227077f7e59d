"""The decay pass's promise, as a property (both stores): no tick ever hard-deletes a row of any table, and
restoring everything it archived gives back exactly the previous search results (ids, order, scores) for the
same queries at the same search time.

Random memories (importance, pin, last access, expiry after the search time) are written by the real Writer and
embedded by the real Embedder; searches are recorded at a fixed ``as_of`` by a Searcher that records no access
(a search's access counts would change the next search's scores); the pass runs at random future times with
random budgets, driven as the loop actor drives it. ``M3_FUZZ_EXAMPLES`` scales the examples (long runs).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from m3.actors.system import ActorSystem
from m3.cognition.decay import DecayPass
from m3.config import Config
from m3.embed.minilm import MiniLMEmbedder
from m3.protocols.messages.memory import (
    MemoryFilter,
    NewMemory,
    RestoreMemory,
    SearchMemories,
    TouchMemories,
    WriteMemories,
)
from m3.store import schema
from tests.actors.conftest import WAIT_S
from tests.cognition.loop_driver import Driver
from tests.fuzzing import EXAMPLES
from tests.stored import fresh

WORDS = ("deploy", "database", "invoice", "vpn", "lunch", "backup", "release", "printer", "budget", "wiki",
         "token", "staging")
DAY = timedelta(days=1)
_examples = itertools.count()

memory_specs = st.lists(st.fixed_dictionaries({
    "words": st.lists(st.sampled_from(WORDS), min_size=2, max_size=5),
    "importance": st.floats(0.0, 1.0, allow_nan=False),
    "pinned": st.booleans(),
    # Days before now of the last read (None: never read).
    "read_days_ago": st.none() | st.floats(0.0, 400.0),
    # Days after the search time when it expires (None: never).
    "expires_after": st.none() | st.floats(0.01, 300.0),
}), min_size=1, max_size=10)
pass_runs = st.lists(st.tuples(st.floats(0.0, 600.0), st.integers(1, 8)), min_size=1, max_size=3)
queries = st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=2).map(" ".join), min_size=1, max_size=3)


@pytest.fixture
def quiet(config: Config, embedder: MiniLMEmbedder) -> Iterator[ActorSystem]:
    """A whole actor system whose Searcher records no access (the Writer still tells it what it archives)."""
    system = ActorSystem(config, embedder)
    system.searcher.rebind(writer=None)
    system.start()
    yield system
    system.stop()


def keys_of_every_table(url: str) -> dict[str, set[tuple[Any, ...]]]:
    """Each table's primary keys: a row missing afterwards was deleted."""
    with fresh(url) as conn:
        return {table.name: {tuple(row) for row in conn.execute(select(*table.primary_key.columns))}
                for table in schema.metadata.sorted_tables}


def assert_nothing_deleted(before: dict[str, set[tuple[Any, ...]]], after: dict[str, set[tuple[Any, ...]]]) -> None:
    for name, keys in before.items():
        assert keys <= after[name], f"rows of {name} were deleted: {sorted(keys - after[name])[:5]}"


def search(system: ActorSystem, query: str, agent: str, at: datetime, *, include_archived: bool = False
           ) -> list[tuple[str, float]]:
    found = system.searcher.ask(SearchMemories(query=query, k=5, filter=MemoryFilter(
        agent_id=agent, as_of=at, include_archived=include_archived)), WAIT_S)
    return [(item.id, item.score) for item in found.items]


@settings(max_examples=max(3, EXAMPLES // 8), deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(specs=memory_specs, runs=pass_runs, asked=queries)
def test_no_tick_deletes_a_row_and_restoring_what_it_archived_gives_back_the_same_search_results(
        quiet: ActorSystem, specs: list[dict[str, Any]], runs: list[tuple[float, int]], asked: list[str]) -> None:
    system, url = quiet, quiet.config.store_url
    agent = f"example-{next(_examples)}"  # each example searches its own memories; the pass sees them all
    now = datetime.now(UTC)
    search_at = now + DAY
    written = system.writer.ask(WriteMemories(memories=tuple(NewMemory(
        type="event", content=f"Note {i}: {' '.join(spec['words'])}.", agent_id=agent, importance=spec["importance"],
        pinned=spec["pinned"],
        expires_at=None if spec["expires_after"] is None else search_at + spec["expires_after"] * DAY,
    ) for i, spec in enumerate(specs)), actor=agent), WAIT_S)
    for outcome, spec in zip(written, specs, strict=True):
        if spec["read_days_ago"] is not None:
            system.writer.ask(TouchMemories(ids=(outcome.id,), at=now - spec["read_days_ago"] * DAY), WAIT_S)
    system.wait_embedded()
    before = {q: search(system, q, agent, search_at) for q in asked}
    seen_through = {q: search(system, q, agent, search_at, include_archived=True) for q in asked}
    rows_before = keys_of_every_table(url)

    driver = Driver(DecayPass(), system.options, system.writer)
    archived: list[str] = []
    try:
        for days, budget in runs:
            for tick in driver.sweep(search_at + days * DAY, budget=budget):
                archived += [i for reply in tick.replies for i in reply.archived]
    finally:
        driver.close()
    assert_nothing_deleted(rows_before, keys_of_every_table(url))
    gone = set(archived)
    event(f"archived: {'some' if gone else 'none'}")
    for q in asked:
        assert not gone & {i for i, _ in search(system, q, agent, search_at)}
        assert search(system, q, agent, search_at, include_archived=True) == seen_through[q]

    rows_archived = keys_of_every_table(url)
    for memory_id in archived:
        system.writer.ask(RestoreMemory(id=memory_id, reason="property"), WAIT_S)
    assert_nothing_deleted(rows_archived, keys_of_every_table(url))
    assert {q: search(system, q, agent, search_at) for q in asked} == before
