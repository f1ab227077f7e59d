"""The Reflector pass end to end: real Writer, real offline embedder, both stores.

The pass is driven as the loop actor will drive it: ``step()`` inside a read transaction on a connection of
its own, then its writes sent to the Writer in order. Similarity supersession is switched off (threshold 1.0)
where a test is about the Reflector alone, so that nothing but the pass records a conflict.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import select

from m3.actors.supervisor import ActorHandle
from m3.actors.system import ActorSystem
from m3.cognition import reflector_judge
from m3.cognition.contradictions import judge
from m3.cognition.llm import OpenAIChatModel
from m3.cognition.passes import PassContext, PassStep
from m3.cognition.reflector import ReflectPass
from m3.config import Config
from m3.embed.minilm import MiniLMEmbedder
from m3.protocols.messages.conflicts import RecordContradictions
from m3.protocols.messages.memory import ActivateModel, DeleteMemory
from m3.store import loop_state, schema
from m3.store.schema import conflicts as c
from tests.actors.conftest import WAIT_S, write_one
from tests.llmserver import ChatServer
from tests.stored import fresh


@pytest.fixture
def alone(config: Config, embedder: MiniLMEmbedder) -> Iterator[ActorSystem]:
    """A system whose similarity supersession never fires: the Reflector is the only source of conflicts."""
    started = ActorSystem(config.with_overrides(supersede__threshold=1.0), embedder).start()
    yield started
    started.stop()


def write(system: ActorSystem, content: str, **fields: Any) -> str:
    fields.setdefault("type", "fact")
    fields.setdefault("agent_id", "agent-a")
    memory_id: str = system.writer.ask(write_one(content, **fields), WAIT_S)[0].id
    system.wait_embedded()
    return memory_id


def tick(system: ActorSystem, url: str, budget: int = 100, now: datetime | None = None,
         **settings: Any) -> tuple[PassStep, int]:
    """One tick: the pass's step in a read transaction of its own, its writes through the Writer."""
    reflect = ReflectPass()
    ctx = PassContext(now=now or datetime.now(UTC), budget=budget, settings=settings)
    with fresh(url) as conn:
        step = reflect.step(conn, ctx)
    replies = [system.writer.ask(msg, WAIT_S) for msg in step.writes]
    return step, reflect.produced(replies)


def conflicts(url: str) -> list[dict[str, Any]]:
    with fresh(url) as conn:
        return [dict(row) for row in conn.execute(select(c).order_by(c.c.seq)).mappings()]


def test_a_changed_value_is_recorded_as_a_contradiction_with_both_ids_and_the_reason(
        alone: ActorSystem, store_url: str) -> None:
    old = write(alone, "I have 2 cats at home.")
    new = write(alone, "These days I have 3 cats at home, all rescued.")
    step, produced = tick(alone, store_url)
    assert (step.seen, produced, step.more, step.llm_calls) == (2, 1, False, 0)
    [found] = conflicts(store_url)
    assert (found["memory_a"], found["memory_b"], found["kind"], found["status"]) == (old, new, "contradiction", "open")
    assert found["reason"] == "number: 2 vs 3"
    assert 0.5 < found["similarity"] < 0.92
    assert found["details"] == {"by": "rule", "differences": {"number": [["2"], ["3"]]}}
    assert (found["scope"], found["agent_id"]) == ("agent", "agent-a")
    h = schema.memory_history
    with fresh(store_url) as conn:
        events = conn.execute(select(h.c.memory_id, h.c.actor).where(h.c.event == "conflict_detected")).all()
        assert sorted(events) == sorted([(old, "m3:reflector"), (new, "m3:reflector")])
        assert loop_state.watermark(conn, "reflect") == {"seq": 2}


def test_distinct_templated_facts_are_not_recorded_and_a_restatement_only_as_a_duplicate(
        alone: ActorSystem, store_url: str) -> None:
    write(alone, "Customer 4411 ordered 3 laptops on 2026-11-02.")
    write(alone, "On 2026-11-02, customer 4412 placed an order for 3 laptops.")
    write(alone, "Ticket OPS-120 was assigned to Alice with priority 2.")
    write(alone, "Bruno now owns ticket OPS-123, priority 2.")
    said = write(alone, "The deploy runs every night at 02:00.")
    again = write(alone, "Remember that the nightly deploy job starts at 02:00.")
    step, produced = tick(alone, store_url)
    assert (step.seen, produced) == (6, 1)
    assert [(row["memory_a"], row["memory_b"], row["kind"]) for row in conflicts(store_url)] == [
        (said, again, "duplicate")]


def test_the_same_fact_reworded_with_every_anchor_kept_is_recorded_as_a_duplicate_and_retires_nothing(
        alone: ActorSystem, store_url: str) -> None:
    old = write(alone, "Sensor S-120 in Berlin read 1200.00 kPa on 2026-09-01.")
    new = write(alone, "On 2026-09-01 the pressure at sensor S-120 (Berlin) was 1200.00 kPa.")
    step, produced = tick(alone, store_url)
    assert (step.seen, produced) == (2, 1)
    [found] = conflicts(store_url)
    assert (found["memory_a"], found["memory_b"], found["kind"], found["status"]) == (old, new, "duplicate", "open")
    assert found["reason"] == ("duplicate: the same id=s-120, name=berlin, number=1200, occasion=2026-09-01 "
                               "in other words")
    assert 0.8 < found["similarity"] < 0.92
    m = schema.memories
    with fresh(store_url) as conn:
        assert conn.execute(select(m.c.id).where(m.c.retired_at.is_not(None))).all() == []


def test_a_reworded_pair_below_the_duplicate_floor_is_not_recorded(alone: ActorSystem, store_url: str) -> None:
    write(alone, "Sensor S-120 in Berlin read 1200.00 kPa on 2026-09-01.")
    write(alone, "On 2026-09-01 the pressure at sensor S-120 (Berlin) was 1200.00 kPa.")
    step, produced = tick(alone, store_url, duplicate_similarity=0.95)
    assert (step.seen, produced) == (2, 0)
    assert conflicts(store_url) == []


def test_a_first_person_note_whose_name_changed_is_recorded_as_a_contradiction(
        alone: ActorSystem, store_url: str) -> None:
    old = write(alone, "I was thinking about my recent family trip to Hawaii and the snorkeling.")
    new = write(alone, "I was thinking about my recent family trip to Paris and the snorkeling.")
    assert tick(alone, store_url)[1] == 1
    [found] = conflicts(store_url)
    assert (found["memory_a"], found["memory_b"], found["kind"]) == (old, new, "contradiction")
    assert (found["reason"], found["details"]["differences"]) == ("name: hawaii vs paris",
                                                                  {"name": [["hawaii"], ["paris"]]})


def test_a_second_tick_records_nothing_new_and_a_rerun_from_scratch_repeats_no_pair(
        alone: ActorSystem, store_url: str) -> None:
    write(alone, "I lead a team of 4 engineers.")
    write(alone, "My team has grown: I now lead five engineers.")
    assert tick(alone, store_url)[1] == 1
    again, produced = tick(alone, store_url)
    assert (again.seen, again.writes, produced) == (0, (), 0)
    # Even with the watermark moved back, a pair recorded once is never recorded again.
    reset = RecordContradictions(pass_name="reflect", watermark={"seq": 0}, actor="tester")
    assert alone.writer.ask(reset, WAIT_S) == 0
    rerun, produced = tick(alone, store_url)
    assert (rerun.seen, produced) == (2, 0)
    assert len(conflicts(store_url)) == 1


def test_other_owners_memories_are_never_paired(alone: ActorSystem, store_url: str) -> None:
    write(alone, "I have 2 cats at home.", agent_id="agent-a", user_id="u1")
    write(alone, "These days I have 3 cats at home, all rescued.", agent_id="agent-a", user_id="u2")
    write(alone, "These days I have 4 cats at home, all rescued.", agent_id="agent-b", user_id="u1")
    write(alone, "I have 5 cats at home.", scope="user", agent_id=None, user_id="u1")
    step, produced = tick(alone, store_url)
    assert (step.seen, produced) == (4, 0)


def test_agent_a_private_memory_is_never_paired_with_agent_b_or_with_a_shared_one(
        alone: ActorSystem, store_url: str) -> None:
    write(alone, "My favourite colour is blue.", agent_id="agent-a", scope="agent")
    write(alone, "My favourite colour is green.", agent_id="agent-b", scope="agent")
    write(alone, "My favourite colour is red.", agent_id="agent-a", scope="org")
    assert tick(alone, store_url)[1] == 0
    mine = write(alone, "My favourite colour is yellow.", agent_id="agent-a", scope="agent")
    assert tick(alone, store_url)[1] == 1
    [found] = conflicts(store_url)
    assert found["memory_b"] == mine and found["reason"] == "attribute favourite colour: blue vs yellow"
    assert (found["scope"], found["agent_id"]) == ("agent", "agent-a")


def test_exempt_types_retired_and_archived_memories_are_passed_over(alone: ActorSystem, store_url: str) -> None:
    write(alone, "I have 2 cats at home.", type="conversation")
    write(alone, "These days I have 3 cats at home, all rescued.", type="event")
    step, produced = tick(alone, store_url)
    assert (step.seen, produced) == (2, 0)
    m = schema.memories
    old = write(alone, "I lead a team of 4 engineers.")
    with fresh(store_url) as conn:  # archived by decay (not a Writer operation yet on this branch)
        conn.execute(m.update().where(m.c.id == old).values(archived_at=datetime.now(UTC), archive_reason="decay"))
        conn.commit()
    write(alone, "My team has grown: I now lead five engineers.")
    assert tick(alone, store_url)[1] == 0


def test_the_budget_bounds_a_tick_and_more_says_work_is_waiting(alone: ActorSystem, store_url: str) -> None:
    first = write(alone, "I have 2 cats at home.")
    write(alone, "These days I have 3 cats at home, all rescued.")
    write(alone, "I lead a team of 4 engineers.")
    step, produced = tick(alone, store_url, budget=2)
    assert (step.seen, step.more, produced) == (2, True, 1)
    [found] = conflicts(store_url)
    assert found["memory_a"] == first
    step, produced = tick(alone, store_url, budget=2)
    assert (step.seen, step.more, produced) == (1, False, 0)


def test_a_memory_waiting_for_its_vector_stops_the_tick_until_it_is_old(
        start_writer: Callable[..., ActorHandle], store_url: str) -> None:
    writer = start_writer()  # no Embedder: the memory gets no vector
    writer.ask(write_one("I have 2 cats at home.", agent_id="agent-a"), WAIT_S)
    reflect = ReflectPass()
    with fresh(store_url) as conn:
        assert reflect.step(conn, PassContext(now=datetime.now(UTC), budget=10)) == PassStep(seen=0)  # no model yet
    writer.ask(ActivateModel(model="minilm-test", dim=384, require_complete=False), WAIT_S)
    with fresh(store_url) as conn:
        waiting = reflect.step(conn, PassContext(now=datetime.now(UTC), budget=10))
        late = reflect.step(conn, PassContext(now=datetime.now(UTC) + timedelta(hours=1), budget=10))
    assert (waiting.seen, waiting.writes) == (0, ())
    assert late.seen == 1
    [request] = late.writes
    assert isinstance(request, RecordContradictions)
    assert (request.watermark, request.conflicts) == ({"seq": 1}, ())


def test_a_pair_supersession_flagged_as_a_near_duplicate_never_becomes_a_contradiction_too(
        system: ActorSystem, store_url: str) -> None:
    old = write(system, "Customer 4411 ordered 3 laptops.")
    new = write(system, "Customer 4411 ordered 4 laptops.")
    [flagged] = conflicts(store_url)
    assert (flagged["kind"], flagged["memory_a"], flagged["memory_b"]) == ("near_duplicate", old, new)
    step, produced = tick(system, store_url)
    assert (step.seen, produced) == (2, 0)
    assert [row["kind"] for row in conflicts(store_url)] == ["near_duplicate"]


@pytest.mark.parametrize("hard", [False, True], ids=["retired", "erased"])
def test_a_pair_retired_or_erased_between_the_step_and_its_commit_is_skipped_and_the_watermark_still_moves(
        alone: ActorSystem, store_url: str, hard: bool) -> None:
    old = write(alone, "I have 2 cats at home.")
    write(alone, "These days I have 3 cats at home, all rescued.")
    with fresh(store_url) as conn:
        step = ReflectPass().step(conn, PassContext(now=datetime.now(UTC), budget=10))
    [request] = step.writes
    assert isinstance(request, RecordContradictions) and len(request.conflicts) == 1
    alone.writer.ask(DeleteMemory(id=old, hard=hard, actor="agent-a"), WAIT_S)
    assert alone.writer.ask(request, WAIT_S) == 0
    assert conflicts(store_url) == []
    with fresh(store_url) as conn:
        assert loop_state.watermark(conn, "reflect") == {"seq": 2}


PAIRS = {
    "cats": ("I have 2 cats at home.", "These days I have 3 cats at home, all rescued."),
    "customer": ("Customer 4411 ordered 3 laptops.", "Customer 4411 ordered 4 laptops."),
    "meat": ("I eat meat most days.", "I don't eat meat any more."),
    "colour": ("My favourite colour is blue.", "My favourite colour is green."),
}


def scripted_judge(body: dict[str, Any]) -> str:
    """The stand-in's answer for one pair, chosen by what the request asks (not by the order of requests)."""
    asked = json.loads(body["messages"][1]["content"])
    if asked["older_note"] == PAIRS["cats"][0]:
        return json.dumps({"conflict": True, "reason": "cat count changed"})
    if asked["older_note"] == PAIRS["customer"][0]:
        return json.dumps({"conflict": False, "reason": "a second order"})
    return '{"conflict": "maybe"'  # malformed: not even JSON


def test_the_model_judges_each_pair_within_the_call_budget_and_the_rule_decides_the_rest(
        alone: ActorSystem, store_url: str) -> None:
    ids = {name: (write(alone, older, agent_id=f"agent-{name}"), write(alone, newer, agent_id=f"agent-{name}"))
           for name, (older, newer) in PAIRS.items()}
    # The stand-in answers only POST /v1/chat/completions (any other route is a 404, which would fail the call).
    with ChatServer([scripted_judge] * 3) as server, \
            OpenAIChatModel(server.url, server.model, timeout_s=10.0, retries=0) as model:
        reflect = ReflectPass()
        with fresh(store_url) as conn:
            step = reflect.step(conn, PassContext(now=datetime.now(UTC), budget=100, llm=model, llm_calls=3))
        produced = reflect.produced([alone.writer.ask(msg, WAIT_S) for msg in step.writes])
        requests = list(server.requests)
    assert (step.seen, step.llm_calls, len(requests)) == (8, 3, 3)
    asked: dict[str, dict[str, Any]] = {}
    for body in requests:
        assert body["response_format"] == {"type": "json_object"}
        question = json.loads(body["messages"][1]["content"])
        assert set(question) == {"older_note", "newer_note", "rule"}
        assert set(question["rule"]) == {"conflict", "reason"}
        [name] = [n for n, pair in PAIRS.items() if (question["older_note"], question["newer_note"]) == pair]
        rule = judge(*PAIRS[name])
        # The client appends the shape wanted to the system message (JSON mode promises JSON, not a shape).
        system = f"{reflector_judge.SYSTEM}\n\nAnswer with JSON only: {reflector_judge.SCHEMA_HINT}"
        assert body["messages"] == [{"role": "system", "content": system},
                                    {"role": "user", "content": reflector_judge.prompt(*PAIRS[name], rule)}]
        asked[name] = question
    [unasked] = set(PAIRS) - set(asked)  # beyond the call budget: the least similar pair
    found = {row["memory_a"]: row for row in conflicts(store_url)}
    by_pair = {name: found.get(older) for name, (older, _) in ids.items()}
    for name, row in by_pair.items():
        rule = judge(*PAIRS[name])
        if name == "cats" and name in asked:
            assert row is not None and row["reason"] == "model: cat count changed"
            assert row["details"]["by"] == "model"
        elif name == "customer" and name in asked:
            assert row is None  # the model overrules the rule's conflict
        else:  # malformed answer or beyond the budget: the rule's verdict
            assert rule.conflict == (row is not None), name
            if row is not None:
                assert (row["reason"], row["details"]["by"]) == (rule.reason, "rule")
        if row is not None:
            assert row["memory_b"] == ids[name][1]
    assert produced == sum(row is not None for row in by_pair.values()) == 3
    # One of meat/colour got the malformed answer, the other no call: both are the rule's conflicts.
    assert {by_pair["meat"]["details"]["by"], by_pair["colour"]["details"]["by"]} == {"rule"}  # type: ignore[index]
    assert {"cats", "customer"} <= set(asked), f"the pair beyond the budget was {unasked}"
