"""The roll-up pass on each store, with the real Writer, Embedder and offline model: related notes of one owner
become one belief linked ``consolidates`` to each; nothing else is mixed in, nothing is deleted."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import func, select

from m3.actors.system import ActorSystem
from m3.cognition.llm import OpenAIChatModel
from m3.cognition.passes import PassContext
from m3.cognition.rollup import RollupPass
from m3.gateway.service import CallContext, Service
from m3.protocols.messages.rollup import CommitRollup
from m3.store.engine import StoreOptions, open_engine
from m3.store.schema import memories as m
from tests.cognition.rollup_driver import WAIT_S, run_until_idle, tick
from tests.llmserver import ChatServer, Status

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "trio"  # the gateway's actor bridge wakes trio tasks

A, B = CallContext(agent_id="agent-a"), CallContext(agent_id="agent-b")

DEPLOYS = (
    "Production deploys happen on Friday afternoons, after the staging checks pass.",
    "We deploy to production every Friday once the staging checks are green.",
    "Friday is deploy day: production gets the release after staging checks pass.",
)
ANOTHER_DEPLOY = "The production deploy waits for Friday and for green staging checks."
UNRELATED = (
    "The cat's vet appointment is on the 14th at nine.",
    "Buy oat milk and sourdough bread on the way home.",
    "The tax filing needs the receipts from March.",
)


async def write(service: Service, content: str, ctx: CallContext = A, **extra: Any) -> str:
    return str((await service.call("memory_write", {"content": content, "type": "note", **extra}, ctx))["id"])


async def beliefs(service: Service, ctx: CallContext = A) -> list[dict[str, Any]]:
    found = await service.call("memory_list", {"type": "belief", "limit": 100}, ctx)
    return list(found["items"])


async def consolidated(service: Service, belief_id: str, ctx: CallContext = A) -> set[str]:
    graph = await service.call("memory_graph", {"id": belief_id}, ctx)
    return {e["to_id"] for e in graph["edges"] if e["type"] == "consolidates" and e["from_id"] == belief_id}


def count_rows(system: ActorSystem) -> int:
    engine = open_engine(StoreOptions(url=system.options.url), "reader")
    try:
        with engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(m)).scalar_one())
    finally:
        engine.dispose()


async def test_related_notes_of_one_owner_get_one_belief_linked_to_each_and_unrelated_notes_none(
        service: Service, system: ActorSystem) -> None:
    related = [await write(service, text) for text in DEPLOYS]
    others = [await write(service, text) for text in UNRELATED]
    assert run_until_idle(system) == 1
    [belief] = await beliefs(service)
    assert belief["scope"] == "agent" and belief["agent_id"] == "agent-a"
    assert await consolidated(service, belief["id"]) == set(related)
    assert not set(others) & await consolidated(service, belief["id"])
    # Extractive: every line is a sentence of a source, and the title names what they share.
    assert all(any(line in text for text in DEPLOYS) for line in belief["content"].splitlines())
    assert "production" in belief["title"].lower() and "(3 notes)" in belief["title"]
    for memory_id in related + others:  # the sources stay as they were
        assert (await service.call("memory_get", {"id": memory_id}, A))["retired_at"] is None


async def test_a_rerun_writes_nothing_new_even_when_it_looks_at_everything_again(
        service: Service, system: ActorSystem) -> None:
    for text in DEPLOYS:
        await write(service, text)
    assert run_until_idle(system) == 1
    rows_before = count_rows(system)
    step, produced = tick(system)
    assert (step.seen, produced, step.writes) == (0, 0, ())
    # A watermark of another model starts again from the first vector: the cluster is summarised already.
    system.writer.ask(CommitRollup(watermark={"model": "another-model", "seq": 0}), WAIT_S)
    step, produced = tick(system)
    assert step.seen > 0 and produced == 0
    assert count_rows(system) == rows_before


async def test_another_owners_notes_are_never_mixed_in(service: Service, system: ActorSystem) -> None:
    mine = [await write(service, text) for text in DEPLOYS[:2]]
    theirs = [await write(service, text, B) for text in (DEPLOYS[2], ANOTHER_DEPLOY)]
    # Two related notes each: neither owner has a cluster of three.
    assert run_until_idle(system) == 0
    assert await beliefs(service, A) == [] and await beliefs(service, B) == []
    await write(service, ANOTHER_DEPLOY)
    assert run_until_idle(system) == 1
    [belief] = await beliefs(service, A)
    assert not set(theirs) & await consolidated(service, belief["id"])
    assert set(mine) < await consolidated(service, belief["id"])


async def test_a_private_note_of_agent_a_is_never_in_a_belief_that_b_can_see(
        service: Service, system: ActorSystem) -> None:
    private = await write(service, DEPLOYS[0])  # scope=agent: agent-a's own
    shared = [await write(service, text, scope="org") for text in (*DEPLOYS[1:], ANOTHER_DEPLOY)]
    assert run_until_idle(system) == 1
    [seen_by_b] = await beliefs(service, B)
    assert seen_by_b["scope"] == "org"
    assert await consolidated(service, seen_by_b["id"], B) == set(shared)
    assert private not in await consolidated(service, seen_by_b["id"], A)


async def test_a_new_related_note_gives_a_new_version_of_the_belief_and_the_old_one_stays_in_history(
        service: Service, system: ActorSystem) -> None:
    first = [await write(service, text) for text in DEPLOYS]
    assert run_until_idle(system) == 1
    [old] = await beliefs(service)
    joined = await write(service, ANOTHER_DEPLOY)
    assert run_until_idle(system) == 1
    [new] = await beliefs(service)
    assert new["id"] != old["id"] and await consolidated(service, new["id"]) == {*first, joined}
    retired = await service.call("memory_get", {"id": old["id"]}, A)
    assert retired["retire_reason"] == "superseded" and retired["superseded_by"] == new["id"]
    assert await consolidated(service, old["id"]) == set(first)  # the old version keeps what it summarised
    as_before = await service.call("memory_list", {"type": "belief", "include_retired": True}, A)
    assert {item["id"] for item in as_before["items"]} == {old["id"], new["id"]}
    found = await service.call("memory_search", {"query": "production deploys on Friday", "k": 10}, A)
    assert {*first, joined} <= {item["id"] for item in found["items"]}  # the sources are still found


async def test_a_belief_whose_source_changed_before_the_commit_is_left_out_and_looked_at_again(
        service: Service, system: ActorSystem) -> None:
    notes = [await write(service, text) for text in DEPLOYS]
    system.wait_embedded(WAIT_S)
    engine = open_engine(StoreOptions(url=system.options.url), "reader")
    try:
        with engine.connect() as conn, conn.begin():
            step = RollupPass().step(conn, PassContext(now=datetime.now(UTC), budget=100))
    finally:
        engine.dispose()
    corrected = await service.call("memory_supersede", {"id": notes[0], "content": ANOTHER_DEPLOY}, A)
    [written] = [system.writer.ask(w, WAIT_S) for w in step.writes]
    assert (written.created, written.skipped) == ((), 1)
    assert await beliefs(service) == []
    # The new version has a vector after the watermark: the owner is clustered again, with it.
    assert run_until_idle(system) == 1
    [belief] = await beliefs(service)
    assert await consolidated(service, belief["id"]) == {corrected["id"], *notes[1:]}


async def test_a_tick_looks_at_most_at_its_budget_and_says_when_more_waits(
        service: Service, system: ActorSystem) -> None:
    for text in DEPLOYS:
        await write(service, text)
    # Two new vectors are read; their owner is clustered over all its notes, the third included.
    first, produced = tick(system, budget=2)
    assert (first.seen, first.more, produced) == (2, True, 1)
    # The third note's vector and the belief's: looked at, nothing new to write.
    second, produced = tick(system, budget=2)
    assert (second.seen, second.more, produced) == (2, True, 0)
    third, produced = tick(system, budget=2)
    assert (third.seen, third.more, produced, third.writes) == (0, False, 0, ())


async def test_with_a_model_the_belief_is_the_models_summary_and_a_bad_answer_falls_back(
        service: Service, system: ActorSystem) -> None:
    summary = "Production deploys go out on Fridays after green staging checks."
    with ChatServer([json.dumps({"title": "Friday deploys", "summary": summary})]) as server, \
            OpenAIChatModel(server.url, server.model, timeout_s=10.0, retries=0) as client:
        for text in DEPLOYS:
            await write(service, text)
        step, produced = tick(system, llm=client, llm_calls=1)
        assert (produced, step.llm_calls, len(server.requests)) == (1, 1, 1)
        assert server.requests[0]["response_format"] == {"type": "json_object"}
        [belief] = await beliefs(service)
        assert (belief["content"], belief["title"]) == (summary, "Friday deploys")
        assert belief["metadata"]["rollup"]["method"] == "model"

        # An empty summary, then an HTTP 500: each owner's belief is the extractive one.
        server.add(json.dumps({"summary": ""}), Status(500))
        for agent in ("agent-empty", "agent-500"):
            ctx = CallContext(agent_id=agent)
            for text in DEPLOYS:
                await write(service, text, ctx)
            step, produced = tick(system, llm=client, llm_calls=1)
            assert (produced, step.llm_calls) == (1, 1)
            [fallback] = await beliefs(service, ctx)
            assert fallback["metadata"]["rollup"]["method"] == "extractive"
            assert all(any(line in text for text in DEPLOYS) for line in fallback["content"].splitlines())
        assert len(server.requests) == 3

        # No calls left in the budget: the model is never asked.
        ctx = CallContext(agent_id="agent-no-calls")
        for text in DEPLOYS:
            await write(service, text, ctx)
        step, produced = tick(system, llm=client, llm_calls=0)
        assert (produced, step.llm_calls, len(server.requests)) == (1, 0, 3)
        [unasked] = await beliefs(service, ctx)
        assert unasked["metadata"]["rollup"]["method"] == "extractive"
