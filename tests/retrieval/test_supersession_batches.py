"""Similarity supersession of vectors that arrive together: a batch decides exactly as one vector at a time.

The Writer stores a unit of vectors and then decides on each (on PostgreSQL the candidates of all of them
come from one statement, m3.store.pg_nearest.nearest_each): each vector must see the vectors stored before
it, in earlier transactions and earlier in its own batch, and no memory retired by an earlier decision of
the batch. Each test writes the same texts for two agents (two owner groups that never meet) and stores
one agent's vectors in one message, the other's one message per vector, then compares what each ended with.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from sqlalchemy import select

from m3.actors.supervisor import ActorHandle
from m3.embed.minilm import MiniLMEmbedder
from m3.protocols.messages.memory import StoreVectors
from m3.store import schema
from m3.store.engine import StoreOptions
from m3.store.vectors import embed_text
from tests.actors.conftest import WAIT_S, write_one
from tests.stored import fresh

OLD, NEW = "The API uses the old PostgreSQL version", "The API uses the newest PostgreSQL version"
def templated(n: int) -> str:
    """Near-identical notes (cosine above 0.97) that disagree on a time: conflict candidates, never versions."""
    return f"The deploy window opens at {('09:00', '17:00', '11:00')[n]} on Fridays"


def write_all(writer: ActorHandle, agent: str, texts: list[tuple[str, str]]) -> list[str]:
    """Write (type, content) in order, one request each (so each is recorded after the one before)."""
    return [writer.ask(write_one(content, actor=agent, type=kind, agent_id=agent), WAIT_S)[0].id
            for kind, content in texts]


def store(writer: ActorHandle, embedder: MiniLMEmbedder, ids: list[str], texts: list[str]) -> None:
    matrix = np.ascontiguousarray(embedder.embed([embed_text(None, t) for t in texts]), dtype="<f4")
    writer.ask(StoreVectors(model=embedder.model_id, dim=embedder.dim, ids=tuple(ids), vectors=matrix.tobytes()),
               WAIT_S)


def outcome(url: str, agent: str) -> dict[str, Any]:
    """What supersession left for ``agent``, by content: which memories stay current, who superseded whom,
    the links, the conflict candidates (with their cosine) and the notifications."""
    m, r, c, n = schema.memories, schema.memory_relationships, schema.conflicts, schema.notifications
    with fresh(url) as conn:
        found = conn.execute(select(m.c.id, m.c.content, m.c.retired_at, m.c.superseded_by)
                             .where(m.c.agent_id == agent)).all()
        text = {row.id: row.content for row in found}
        links = conn.execute(select(r.c.from_id, r.c.to_id, r.c.type).where(r.c.from_id.in_(list(text)))).all()
        conflicts = conn.execute(select(c.c.memory_a, c.c.memory_b, c.c.kind, c.c.similarity)
                                 .where(c.c.memory_a.in_(list(text)))).all()
        notified = conn.execute(select(n.c.kind, n.c.ref_id).where(n.c.agent_id == agent)).all()
    return {
        "current": sorted(text[row.id] for row in found if row.retired_at is None),
        "superseded": sorted((text[row.id], text.get(row.superseded_by)) for row in found if row.retired_at),
        "links": sorted((text[a], text[b], kind) for a, b, kind in links),
        "conflicts": sorted((text[a], text[b], kind, sim) for a, b, kind, sim in conflicts),
        "notified": sorted((kind, text[ref]) for kind, ref in notified),
    }


def test_two_similar_notes_whose_vectors_arrive_in_one_batch_end_as_if_stored_one_after_the_other(
        start_writer: Callable[..., ActorHandle], store_options: StoreOptions, embedder: MiniLMEmbedder) -> None:
    writer = start_writer()
    texts = [("note", OLD), ("note", NEW)]
    batched, one_by_one = write_all(writer, "batched", texts), write_all(writer, "one-by-one", texts)
    store(writer, embedder, batched, [OLD, NEW])
    for memory_id, content in zip(one_by_one, [OLD, NEW], strict=True):
        store(writer, embedder, [memory_id], [content])
    expected = {"current": [NEW], "superseded": [(OLD, NEW)], "links": [(NEW, OLD, "supersedes")], "conflicts": [],
                "notified": [("superseded", NEW)]}
    assert outcome(store_options.url, "one-by-one") == expected
    assert outcome(store_options.url, "batched") == expected


def test_a_batch_of_versions_and_conflict_candidates_across_owner_groups_decides_as_one_vector_at_a_time(
        start_writer: Callable[..., ActorHandle], store_options: StoreOptions, embedder: MiniLMEmbedder) -> None:
    writer = start_writer()
    # Three owner groups per agent: a version pair (fact), three conflict candidates (note), loners (decision).
    texts = [("fact", OLD), ("note", templated(0)), ("decision", "The team meets on Tuesdays"),
             ("note", templated(1)), ("decision", "The lunch menu changes every Monday"), ("fact", NEW),
             ("note", templated(2))]
    contents = [content for _, content in texts]
    batched, one_by_one = write_all(writer, "batched", texts), write_all(writer, "one-by-one", texts)
    order = [5, 0, 3, 6, 1, 4, 2]  # a batch is decided in the order of writing, whatever its order
    store(writer, embedder, [batched[i] for i in order], [contents[i] for i in order])
    for memory_id, content in zip(one_by_one, contents, strict=True):
        store(writer, embedder, [memory_id], [content])
    expected = outcome(store_options.url, "one-by-one")
    assert expected["current"] == sorted(set(contents) - {OLD})
    assert expected["superseded"] == [(OLD, NEW)]
    assert len(expected["conflicts"]) == 3  # every pair of the templated notes, once
    assert outcome(store_options.url, "batched") == expected
