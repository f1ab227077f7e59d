"""The Searcher ranks a memory written a moment ago as it will rank once its vector is stored."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from m3.actors.searcher import Searcher
from m3.actors.supervisor import ActorHandle
from m3.actors.system import ActorSystem, search_weights
from m3.config import Config
from m3.embed.minilm import MiniLMEmbedder
from m3.protocols.messages.memory import MemoryFilter, SearchMemories, StoreStatus
from m3.retrieval.candidate_rows import CandidateRows
from m3.store import vectors
from m3.store.dialect import dialect_for
from tests.actors.conftest import WAIT_S, write_one
from tests.stored import count

OLDER = [
    "The VPN gateway for the Berlin office uses WireGuard on port 51820.",
    "The VPN gateway for the Lisbon office uses OpenVPN on port 1194.",
    "Our invoices are generated on the first business day of each month.",
    "The data warehouse refreshes every night at 02:00 UTC.",
]
FRESH = "The VPN gateway for the Oslo office uses WireGuard on port 51821."
QUERY = "Oslo VPN gateway"


def top(system: ActorSystem, query: str) -> dict[str, Any]:
    found = system.searcher.ask(SearchMemories(query=query, k=3, filter=MemoryFilter(), explain=True), WAIT_S)
    item: dict[str, Any] = found.model_dump()["items"][0]
    return item


@pytest.fixture
def older_embedded(system: ActorSystem) -> None:
    for text in OLDER:
        system.writer.ask(write_one(text), WAIT_S)
    system.wait_embedded()


def test_a_fresh_memory_without_a_stored_vector_still_ranks_first_for_its_own_keywords(
        system: ActorSystem, older_embedded: None, store_url: str) -> None:
    system.embedder.stop()  # its vector will not be stored during this test
    fresh = system.writer.ask(write_one(FRESH), WAIT_S)[0]
    assert count(store_url, "memory_embeddings", "memory_id = :id", {"id": fresh.id}) == 0
    item = top(system, QUERY)
    assert item["id"] == fresh.id
    assert item["explanation"]["signals"]["dense"]["value"] > 0.5


class HeldUntil:
    """The real embedder, whose first call waits (bounded, shorter than an ask) until ``release`` is set."""

    def __init__(self, inner: Any, release: threading.Event):
        self.inner, self.release = inner, release
        self.model_id, self.dim = inner.model_id, inner.dim
        self.waited: bool | None = None

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if self.waited is None:
            self.waited = self.release.wait(WAIT_S / 3)
        return np.asarray(self.inner.embed(texts))


def test_keyword_matches_read_while_the_query_embeds_bring_their_vectors_so_none_are_read_after_it(
        system: ActorSystem, older_embedded: None, monkeypatch: pytest.MonkeyPatch) -> None:
    # PostgreSQL's leg keeps no vectors: the keyword matches' vectors come with their rows, read while the query
    # embeds, instead of in a statement of their own after it. SQLite's come from its in-memory index. A memory
    # without one (written a moment ago) is embedded on the spot.
    release = threading.Event()
    fetch = CandidateRows.fetch

    def fetching(self: CandidateRows, ids: Sequence[str], *, with_vectors: bool = False) -> Any:
        found = fetch(self, ids, with_vectors=with_vectors)
        if with_vectors:
            release.set()  # the query's embedding may end now
        return found

    monkeypatch.setattr(CandidateRows, "fetch", fetching)
    asked: list[list[str]] = []
    vectors_of = vectors.vectors_of
    monkeypatch.setattr(vectors, "vectors_of", lambda conn, model, ids: asked.append(list(ids)) or vectors_of(
        conn, model, ids))
    system.embedder.stop()
    fresh = system.writer.ask(write_one(FRESH), WAIT_S)[0]
    held = HeldUntil(system.embedder_backend, release)
    config = system.config
    searcher = ActorHandle("searcher-held", Searcher, system.options, embedder=held,
                           weights=search_weights(config), candidates=config["search.candidates"], writer=None).start()
    try:
        found = searcher.ask(SearchMemories(query=QUERY, k=4, filter=MemoryFilter(), explain=True), WAIT_S)
    finally:
        searcher.stop()
    assert held.waited  # the keyword matches' rows were read before the vector was there
    assert asked == []
    assert found.items[0].id == fresh.id and len(found.items) >= 3
    assert all(item.explanation is not None and item.explanation["cosine"] is not None for item in found.items)


def test_the_meaning_signal_of_a_fresh_memory_does_not_change_when_its_vector_arrives(
        system: ActorSystem, older_embedded: None) -> None:
    fresh = system.writer.ask(write_one(FRESH), WAIT_S)[0]
    before = top(system, QUERY)
    system.wait_embedded()
    after = top(system, QUERY)
    assert before["id"] == after["id"] == fresh.id
    assert before["explanation"]["signals"]["dense"]["value"] == pytest.approx(
        after["explanation"]["signals"]["dense"]["value"], abs=1e-5)


TRIP = ["We land in Lisbon on Friday morning.", "The Lisbon hotel is near the river, booked for three nights.",
        "Remember to pack the camera charger."]


def test_memories_of_one_conversation_share_its_support_and_a_memory_without_one_is_its_own(
        system: ActorSystem) -> None:
    for text in TRIP:
        system.writer.ask(write_one(text, conversation_id="trip"), WAIT_S)
    note = system.writer.ask(write_one("Lisbon trams take contactless cards."), WAIT_S)[0]
    system.wait_embedded()
    found = system.searcher.ask(SearchMemories(query="Lisbon trip", k=4, filter=MemoryFilter(), explain=True), WAIT_S)
    items = found.model_dump()["items"]
    assert len(items) == 4
    support = {i["explanation"]["signals"]["conversation"]["value"] for i in items if i["conversation_id"] == "trip"}
    assert len(support) == 1
    alone = next(i for i in items if i["id"] == note.id)["explanation"]
    assert alone["signals"]["conversation"]["value"] == pytest.approx(alone["own"], abs=1e-6)
    for item in items:
        parts = item["explanation"]["signals"]
        assert sum(p["contribution"] for p in parts.values()) == pytest.approx(item["score"], abs=1e-5)


def embedding_threads() -> int:
    return sum(1 for t in threading.enumerate() if t.name.startswith("m3-searcher-embed"))


def test_a_search_embeds_its_query_on_a_helper_thread_that_ends_with_the_searcher(
        system: ActorSystem, older_embedded: None) -> None:
    before = embedding_threads()
    config = system.config
    searcher = ActorHandle("searcher-extra", Searcher, system.options, embedder=system.embedder_backend,
                           weights=search_weights(config), candidates=config["search.candidates"], writer=None).start()
    try:
        found = searcher.ask(SearchMemories(query="Berlin VPN port", k=2, filter=MemoryFilter(), explain=True), WAIT_S)
        assert "Berlin" in found.items[0].content
        assert found.items[0].explanation is not None and found.items[0].explanation["cosine"] > 0.3
        assert embedding_threads() == before + 1
    finally:
        searcher.stop()
    assert embedding_threads() == before


def test_the_keyword_leg_checks_the_best_matches_first_under_a_filter_holding_much_of_the_store(
        system: ActorSystem, monkeypatch: pytest.MonkeyPatch) -> None:
    # Ranking every keyword match is for filters that keep a small part of the store; a type most memories
    # have gives the same hits from FTS5's best matches checked first (SQLite). PostgreSQL ranks alike either way.
    for i in range(6):
        system.writer.ask(write_one(f"the garden shed needs paint, note {i}", agent_id="gardener"), WAIT_S)
    system.writer.ask(write_one("paint the garden shed green", type="decision", agent_id="gardener"), WAIT_S)
    system.writer.ask(write_one("paint the fence white", agent_id="painter"), WAIT_S)
    system.wait_embedded(WAIT_S)
    kind = type(dialect_for(system.options.url))
    asked: list[bool] = []
    memory_hits = kind.memory_hits

    def recording(self: Any, conn: Any, query: str, where: Any, limit: int, *, selective: bool,
                  **given: Any) -> Any:
        asked.append(selective)
        return memory_hits(self, conn, query, where, limit, selective=selective, **given)

    monkeypatch.setattr(kind, "memory_hits", recording)
    found = {}
    for name, flt in {"none": MemoryFilter(), "broad type": MemoryFilter(type="note"),
                      "rare type": MemoryFilter(type="decision"), "agent": MemoryFilter(agent_id="gardener"),
                      "rare agent": MemoryFilter(agent_id="painter")}.items():
        found[name] = system.searcher.ask(SearchMemories(query="garden shed paint", k=8, filter=flt), WAIT_S)
    in_memory = not dialect_for(system.options.url).nearest_in_sql
    # An agent's share is counted type by type: the gardener wrote most of the store, the painter one memory.
    assert asked == ([False, False, True, False, True] if in_memory else [False, True, True, True, True])
    assert found["broad type"].count == 7 and found["rare type"].count == 1 and found["agent"].count == 7
    assert [item.content for item in found["rare agent"].items] == ["paint the fence white"]


@pytest.mark.parametrize("int8", [True, False])
def test_queries_embed_with_8_bit_products_unless_configured_off_and_fresh_memories_always_exactly(
        config: Config, embedder: MiniLMEmbedder, int8: bool) -> None:
    system = ActorSystem(config.with_overrides(embed__query_int8=int8), embedder).start()
    try:
        for text in OLDER:
            system.writer.ask(write_one(text), WAIT_S)
        system.wait_embedded()
        system.embedder.stop()  # the fresh memory's vector is computed by the Searcher, on the spot
        fresh = system.writer.ask(write_one(FRESH), WAIT_S)[0]
        item = top(system, QUERY)
        status = system.searcher.ask(StoreStatus(model=embedder.model_id), WAIT_S)
    finally:
        system.stop()
    assert status["description"]["search_path"]["query_embedding"] == ("int8" if int8 else "float32")
    # The fresh memory's vector is the exact one its stored vector will be, whatever the query's precision.
    exact_query = embedder.embed([QUERY])[0]
    expected = float(embedder.embed([FRESH])[0] @ exact_query)
    assert item["id"] == fresh.id
    cosine = item["explanation"]["cosine"]
    if int8:
        assert cosine != pytest.approx(expected, abs=1e-6) and cosine == pytest.approx(expected, abs=0.02)
    else:
        assert cosine == pytest.approx(expected, abs=1e-6)


def test_a_long_lived_process_loads_the_query_model_before_the_first_search(config: Config,
                                                                             embedder: MiniLMEmbedder) -> None:
    system = ActorSystem(config, embedder).start()
    try:
        system.warm_queries().join(WAIT_S)
        status = system.searcher.ask(StoreStatus(model=embedder.model_id), WAIT_S)
    finally:
        system.stop()
    assert status["description"]["search_path"]["query_embedding"] == "int8"


def test_the_searcher_reads_term_proximity_in_the_texts_of_its_best_candidates_when_it_weighs_something(
        config: Config, embedder: MiniLMEmbedder) -> None:
    assert config["search.weight_proximity"] == 0.0  # off by default
    system = ActorSystem(config.with_overrides(search__weight_proximity=0.3), embedder).start()
    try:
        _proximity_read(system)
    finally:
        system.stop(drain_embeddings=False)


def _proximity_read(system: ActorSystem) -> None:
    together = system.writer.ask(write_one("Last week I replaced the bike chain and cassette."), WAIT_S)[0]
    apart = system.writer.ask(write_one(
        "The chain of the old bike squeaked, so I oiled it on Sunday; later, sorting the attic, I found a cassette "
        "player and some tapes."), WAIT_S)[0]
    system.wait_embedded()
    found = system.searcher.ask(SearchMemories(query="bike chain cassette", k=2, filter=MemoryFilter(),
                                               explain=True), WAIT_S)
    signals = {i["id"]: i["explanation"]["signals"] for i in found.model_dump()["items"]}
    assert signals[together.id]["proximity"]["value"] == 1.0
    assert signals[apart.id]["proximity"]["value"] == 0.5
    assert signals[together.id]["proximity"]["weight"] == 0.3
    for item in found.model_dump()["items"]:
        parts = item["explanation"]["signals"]
        assert sum(p["contribution"] for p in parts.values()) == pytest.approx(item["score"], abs=1e-5)
