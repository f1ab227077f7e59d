"""Supersession and deletion: one current version per fact, history with actors, time travel, erasure."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import numpy as np
import pytest
from sqlalchemy import select

from m3.actors.supervisor import ActorHandle
from m3.actors.system import ActorSystem
from m3.embed.minilm import MiniLMEmbedder
from m3.errors import InvalidArgument
from m3.protocols.messages.memory import (
    DeleteMemory,
    GetHistory,
    LinkMemories,
    MemoryFilter,
    SearchMemories,
    StoreVectors,
    SupersedeMemory,
    WriteOutcome,
)
from m3.store import schema
from m3.store.engine import StoreOptions
from m3.store.vectors import embed_text
from tests.actors.conftest import WAIT_S, write_one
from tests.stored import count, fresh, is_postgres, memory

OLD, NEW = "The API uses the old PostgreSQL version", "The API uses the newest PostgreSQL version"
QUESTION = "Which PostgreSQL version does the API use?"


def write(system: ActorSystem, content: str, **fields: Any) -> WriteOutcome:
    """Write one memory and wait until its vector is stored (and supersession has run)."""
    out: WriteOutcome = system.writer.ask(write_one(content, **fields), WAIT_S)[0]
    system.wait_embedded()
    return out


def history(url: str, memory_id: str) -> list[tuple[str, str | None]]:
    h = schema.memory_history
    with fresh(url) as conn:
        return [(r[0], r[1]) for r in conn.execute(
            select(h.c.event, h.c.actor).where(h.c.memory_id == memory_id).order_by(h.c.seq))]


def links(url: str) -> list[tuple[str, str, str]]:
    r = schema.memory_relationships
    with fresh(url) as conn:
        return [(a, b, c) for a, b, c in conn.execute(select(r.c.from_id, r.c.to_id, r.c.type).order_by(r.c.seq))]


def current_ids(url: str) -> set[str]:
    m = schema.memories
    with fresh(url) as conn:
        return {row[0] for row in conn.execute(select(m.c.id).where(m.c.retired_at.is_(None)))}


def search(system: ActorSystem, query: str, as_of: datetime | None = None, **flt: Any) -> list[str]:
    found = system.searcher.ask(SearchMemories(query=query, k=8, filter=MemoryFilter(as_of=as_of, **flt)), WAIT_S)
    return [item["id"] for item in found["items"]]


def between(a: datetime, b: datetime) -> datetime:
    return a + (b - a) / 2


# -- similarity supersession ---------------------------------------------------------------------

def test_a_new_version_of_a_fact_leaves_exactly_one_current_memory_linked_and_recorded(
        system: ActorSystem, store_url: str) -> None:
    first = write(system, OLD, type="fact", agent_id="ops")
    second = write(system, NEW, type="fact", agent_id="ops")
    assert current_ids(store_url) == {second.id}
    old = memory(store_url, first.id)
    assert (old["retire_reason"], old["superseded_by"]) == ("superseded", second.id)
    assert links(store_url) == [(second.id, first.id, "supersedes")]
    assert history(store_url, first.id) == [("created", "tester"), ("superseded", "m3:supersession")]
    assert history(store_url, second.id) == [("created", "tester"), ("supersedes", "m3:supersession")]
    chain = system.searcher.ask(GetHistory(id=first.id), WAIT_S)
    assert chain["versions"] == [first.id, second.id]
    assert chain["events"][1]["details"]["how"] == "similarity"
    assert search(system, QUESTION, type="fact") == [second.id]


@pytest.mark.parametrize("memory_type", ["conversation", "event", "observation"])
def test_exempt_types_never_supersede(system: ActorSystem, store_url: str, memory_type: str) -> None:
    first = write(system, OLD, type=memory_type)
    second = write(system, NEW, type=memory_type)
    assert current_ids(store_url) == {first.id, second.id}
    assert links(store_url) == []


@pytest.mark.parametrize(("a", "b"), [
    ({"agent_id": "alpha"}, {"agent_id": "beta"}),
    ({"agent_id": "alpha", "user_id": "ann"}, {"agent_id": "alpha", "user_id": "bob"}),
    ({"agent_id": "alpha"}, {"agent_id": "alpha", "user_id": "bob"}),
    ({"type": "fact"}, {"type": "decision"}),
], ids=["agents", "users", "user-vs-none", "types"])
def test_memories_of_different_owners_or_types_never_supersede_each_other(
        system: ActorSystem, store_url: str, a: dict[str, str], b: dict[str, str]) -> None:
    first = write(system, OLD, **{"type": "fact", **a})
    second = write(system, NEW, **{"type": "fact", **b})
    assert current_ids(store_url) == {first.id, second.id}


def test_identical_text_is_deduplicated_at_write_not_superseded(system: ActorSystem, store_url: str) -> None:
    first = write(system, OLD, type="fact")
    again = write(system, OLD, type="fact")
    assert (again.id, again.created, again.recorded_at) == (first.id, False, first.recorded_at)
    assert count(store_url, "memories") == 1
    assert history(store_url, first.id) == [("created", "tester")]


@pytest.mark.parametrize("order", ["newest-first", "oldest-first", "one-message"])
def test_whatever_order_the_vectors_arrive_in_the_newest_version_stays_current(
        start_writer: Callable[..., ActorHandle], store_options: StoreOptions, embedder: MiniLMEmbedder,
        order: str) -> None:
    writer = start_writer()
    first = writer.ask(write_one(OLD, type="fact"), WAIT_S)[0]
    second = writer.ask(write_one(NEW, type="fact"), WAIT_S)[0]
    matrix = embedder.embed([embed_text(None, OLD), embed_text(None, NEW)])
    vec = {first.id: matrix[0], second.id: matrix[1]}
    batches = {"newest-first": [[second.id], [first.id]], "oldest-first": [[first.id], [second.id]],
               "one-message": [[second.id, first.id]]}[order]
    for ids in batches:
        blob = np.ascontiguousarray(np.stack([vec[i] for i in ids]), dtype="<f4").tobytes()
        writer.ask(StoreVectors(model=embedder.model_id, dim=embedder.dim, ids=tuple(ids), vectors=blob), WAIT_S)
    assert current_ids(store_options.url) == {second.id}
    assert memory(store_options.url, first.id)["superseded_by"] == second.id
    assert links(store_options.url) == [(second.id, first.id, "supersedes")]


def test_as_of_between_two_versions_sees_the_first_and_after_sees_the_second(system: ActorSystem) -> None:
    first = write(system, OLD, type="fact")
    second = write(system, NEW, type="fact")
    before_both = first.recorded_at - timedelta(microseconds=1)
    assert search(system, QUESTION, as_of=before_both) == []
    assert search(system, QUESTION, as_of=first.recorded_at) == [first.id]
    assert search(system, QUESTION, as_of=between(first.recorded_at, second.recorded_at)) == [first.id]
    retired_at = memory(system.options.url, first.id)["retired_at"]
    assert search(system, QUESTION, as_of=retired_at) == [second.id]
    assert search(system, QUESTION) == [second.id]


# -- explicit supersession -----------------------------------------------------------------------

def test_memory_supersede_replaces_a_memory_however_different_the_new_text(
        system: ActorSystem, store_url: str) -> None:
    first = write(system, OLD, type="decision", agent_id="ops", importance=0.9)
    out: WriteOutcome = system.writer.ask(SupersedeMemory(old_id=first.id, content="We moved the API to MySQL 8.",
                                                          reason="licence review", actor="alice"), WAIT_S)
    system.wait_embedded()
    assert current_ids(store_url) == {out.id}
    new = memory(store_url, out.id)
    assert (new["type"], new["agent_id"], new["importance"]) == ("decision", "ops", 0.9)
    assert memory(store_url, first.id)["superseded_by"] == out.id
    assert links(store_url) == [(out.id, first.id, "supersedes")]
    assert history(store_url, first.id) == [("created", "tester"), ("superseded", "alice")]
    assert history(store_url, out.id) == [("created", "alice")]
    events = system.searcher.ask(GetHistory(id=first.id), WAIT_S)["events"]
    assert events[1]["details"] == {"by": out.id, "how": "explicit", "reason": "licence review"}


def test_superseding_a_retired_version_is_refused_and_changes_nothing(system: ActorSystem, store_url: str) -> None:
    first = write(system, OLD, type="fact")
    second = system.writer.ask(SupersedeMemory(old_id=first.id, content=NEW), WAIT_S)
    system.wait_embedded()
    rows_before = count(store_url, "memories")
    with pytest.raises(InvalidArgument) as err:
        system.writer.ask(SupersedeMemory(old_id=first.id, content="PostgreSQL 17"), WAIT_S)
    assert err.value.details == {"superseded_by": second.id}
    assert count(store_url, "memories") == rows_before


# -- deletion ------------------------------------------------------------------------------------

def test_a_soft_deleted_memory_leaves_search_but_as_of_before_the_deletion_still_sees_it(
        system: ActorSystem, store_url: str) -> None:
    written = write(system, "The wifi password for the lab is on the fridge.")
    assert search(system, "lab wifi password") == [written.id]
    assert system.writer.ask(DeleteMemory(id=written.id, reason="obsolete", actor="bob"), WAIT_S) == "soft"
    assert search(system, "lab wifi password") == []
    deleted_at = memory(store_url, written.id)["retired_at"]
    assert search(system, "lab wifi password", as_of=deleted_at - timedelta(microseconds=1)) == [written.id]
    assert history(store_url, written.id) == [("created", "tester"), ("deleted", "bob")]
    with pytest.raises(InvalidArgument):
        system.writer.ask(DeleteMemory(id=written.id), WAIT_S)


def test_a_hard_delete_removes_the_row_its_vectors_history_links_and_index_entries(
        system: ActorSystem, store_url: str) -> None:
    first = write(system, OLD, type="fact")
    second = write(system, NEW, type="fact")
    other = write(system, "Database upgrades are announced in the ops channel.")
    system.writer.ask(LinkMemories(from_id=other.id, to_id=second.id, type="related"), WAIT_S)
    assert system.writer.ask(DeleteMemory(id=second.id, hard=True), WAIT_S) == "hard"
    assert count(store_url, "memories", "id = :id", {"id": second.id}) == 0
    assert count(store_url, "memory_embeddings", "memory_id = :id", {"id": second.id}) == 0
    assert count(store_url, "memory_history", "memory_id = :id", {"id": second.id}) == 0
    if is_postgres(store_url):  # the tsvector is a column of the row, gone with it
        assert count(store_url, "memories", "fts_content @@ to_tsquery('english', '16')") == 0
    else:  # FTS5 is a table of its own, kept in step by a trigger
        assert count(store_url, "memories_fts", "memories_fts MATCH '\"16\"'") == 0
    assert links(store_url) == []
    assert memory(store_url, first.id)["superseded_by"] is None
    assert second.id not in search(system, QUESTION)
    assert second.id not in search(system, QUESTION, as_of=second.recorded_at)
    assert count(store_url, "memories") == 2
