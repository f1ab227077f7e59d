"""entity_list's order and counts against a count of every mention's memory, on both stores."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import Connection, Engine, insert

from m3.protocols.messages.memory import MemoryFilter, NewMemory
from m3.store import entities, entity_lists
from m3.store import memories as rows
from m3.store.schema import entities as e
from m3.store.schema import entity_mentions as mn

NOW = datetime(2026, 1, 1, tzinfo=UTC)
AGENTS = ("a", "b")
NAMES = ("acme", "berlin", "carol", "dave", "erin", "frank", "gail", "hal")


def _fill(conn: Connection, seed: int) -> list[dict[str, Any]]:
    """Random memories (scopes, agents, some retired), entities and mentions; the mentions as rows with
    their memory's visibility columns."""
    rng = random.Random(seed)
    memories = []
    for i in range(60):
        scope = rng.choice(("agent", "agent", "user", "org"))
        mem = NewMemory(type="note", content=f"memory {seed} {i}", scope=scope, agent_id=rng.choice(AGENTS))
        memory_id = f"00000000-0000-4000-8000-{i:012d}"
        rows.insert_memories(conn, [rows.memory_values(mem, memory_id=memory_id, digest=rows.content_hash(mem.content),
                                                       now=NOW)])
        retired = rng.random() < 0.2
        if retired:
            rows.retire(conn, memory_id, at=NOW, reason="test")
        memories.append({"id": memory_id, "scope": scope, "agent_id": mem.agent_id, "retired": retired})
    mentions = []
    for j in range(40):
        entity_id = f"10000000-0000-4000-8000-{j:012d}"
        name = f"{NAMES[j % len(NAMES)]} {j // 3}"  # several entities share a mention count: ties by name
        conn.execute(insert(e).values(id=entity_id, name=name.title(), norm=name, type=rng.choice(("name", "date")),
                                      scope="org", agent_id=None, user_id=None, partition=f"org||{j}", aliases=[],
                                      created_at=NOW, updated_at=NOW))
        # A skewed number of mentions, so that the most mentioned in all are not always the most visible.
        for k, mem in enumerate(rng.sample(memories, rng.choice((0, 1, 1, 2, 3, 5, 8, 13, 21)))):
            conn.execute(insert(mn).values(entity_id=entity_id, memory_id=mem["id"], span_start=k, span_end=k + 1,
                                           surface=rng.choice((name, name.upper()))))
            mentions.append({"entity": entity_id, "norm": name, "type": None, **mem})
    return mentions


def _expected(conn: Connection, mentions: list[dict[str, Any]], flt: MemoryFilter, type_: str | None
              ) -> list[tuple[str, int]]:
    types = {row[0]: row[1] for row in conn.execute(e.select().with_only_columns(e.c.id, e.c.type))}
    counts: dict[str, int] = {}
    norms = {}
    for row in mentions:
        hidden = flt.enforce_isolation and row["scope"] == "agent" and row["agent_id"] != flt.reader_agent_id
        if row["retired"] or hidden or (type_ is not None and types[row["entity"]] != type_):
            continue
        counts[row["entity"]] = counts.get(row["entity"], 0) + 1
        norms[row["entity"]] = row["norm"]
    return sorted(counts.items(), key=lambda item: (-item[1], norms[item[0]], item[0]))


@pytest.mark.parametrize("seed", range(4))
def test_entities_are_listed_by_visible_mentions_as_a_count_of_every_mention_would_order_them(
        writer_engine: Engine, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    with writer_engine.begin() as conn:
        mentions = _fill(conn, seed)
        for flt in (MemoryFilter(), MemoryFilter(enforce_isolation=True, reader_agent_id="a")):
            for type_ in (None, "name"):
                expected = _expected(conn, mentions, flt, type_)
                for limit, offset in ((1, 0), (3, 0), (5, 2), (10, 7), (50, 0), (4, 30)):
                    want = expected[offset:offset + limit]
                    for rounds_up_to in (10_000, 0):  # counted in rounds; every mention counted at once
                        monkeypatch.setattr(entity_lists, "ROUNDS_UP_TO", rounds_up_to)
                        got = entity_lists.list_entities(conn, type_, limit, offset, flt)
                        assert [(row["id"], row["mentions"]) for row in got] == want, (flt, type_, limit, offset)


def test_a_listed_entity_shows_only_the_spellings_its_reader_may_see(writer_engine: Engine) -> None:
    with writer_engine.begin() as conn:
        memory_ids = []
        for i, (scope, agent) in enumerate((("agent", "a"), ("agent", "b"), ("org", "b"))):
            mem = NewMemory(type="note", content=f"about acme {i}", scope=scope, agent_id=agent)
            memory_ids.append(f"00000000-0000-4000-8000-{i:012d}")
            rows.insert_memories(conn, [rows.memory_values(mem, memory_id=memory_ids[-1],
                                                           digest=rows.content_hash(mem.content), now=NOW)])
        conn.execute(insert(e).values(id="e1", name="Acme", norm="acme", type="name", scope="org", agent_id=None,
                                      user_id=None, partition="org||", aliases=[], created_at=NOW, updated_at=NOW))
        for i, surface in enumerate(("ACME", "Acme Corp", "acme")):
            conn.execute(insert(mn).values(entity_id="e1", memory_id=memory_ids[i], span_start=0, span_end=4,
                                           surface=surface))
        as_a = MemoryFilter(enforce_isolation=True, reader_agent_id="a")
        [listed] = entity_lists.list_entities(conn, None, 10, 0, as_a)
        # Agent b's private memory spelled it "Acme Corp": agent a does not see that spelling nor count it.
        assert listed["mentions"] == 2 and sorted(listed["aliases"]) == ["ACME", "acme"]
        assert entities.search(conn, "acm", None, 5, as_a)[0]["aliases"] == listed["aliases"]
        assert entities.summaries(conn, ["e1"], MemoryFilter())["e1"]["mentions"] == 3


def test_an_entity_left_out_of_a_round_with_the_pages_last_count_still_takes_its_place_by_name(
        writer_engine: Engine) -> None:
    # Forty entities mentioned once each, named in the reverse order of their ids: the first round counts only
    # some of them, and the one named first may be among those it left out.
    with writer_engine.begin() as conn:
        mem = NewMemory(type="note", content="one memory")
        rows.insert_memories(conn, [rows.memory_values(mem, memory_id="m1", digest=rows.content_hash(mem.content),
                                                       now=NOW)])
        for j in range(40):
            entity_id = f"10000000-0000-4000-8000-{j:012d}"
            conn.execute(insert(e).values(id=entity_id, name=f"n{99 - j}", norm=f"n{99 - j}", type="name",
                                          scope="org", agent_id=None, user_id=None, partition="org||", aliases=[],
                                          created_at=NOW, updated_at=NOW))
            conn.execute(insert(mn).values(entity_id=entity_id, memory_id="m1", span_start=j, span_end=j + 1,
                                           surface=f"n{99 - j}"))
        got = entity_lists.list_entities(conn, None, 3, 0, MemoryFilter())
        assert [row["name"] for row in got] == ["n60", "n61", "n62"]
