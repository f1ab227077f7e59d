"""The Observer pass end to end on both stores: chat turns and conversation memories in, observations out through
a real Writer, once, with provenance and the source's privacy; the model path against the stand-in server."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import Engine, select

from m3.actors.supervisor import ActorHandle
from m3.cognition.llm import OpenAIChatModel
from m3.cognition.observer import ObservePass, share
from m3.cognition.passes import ChatModel, PassContext, PassStep
from m3.protocols.messages.memory import NewMemory, WriteChat, WriteMemories
from m3.store import loop_state
from m3.store.engine import StoreOptions, open_engine
from m3.store.schema import memories as m
from m3.store.schema import memory_relationships as rel
from tests.actors.conftest import WAIT_S
from tests.llmserver import ChatServer, Status

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


class Loop:
    """What the loop actor does for a pass: step inside a read transaction, then send the writes to the Writer."""

    def __init__(self, engine: Engine, writer: ActorHandle) -> None:
        self.engine, self.writer, self.observer = engine, writer, ObservePass()

    def step(self, budget: int = 100, llm: ChatModel | None = None, llm_calls: int = 0, **settings: Any) -> PassStep:
        with self.engine.connect() as conn, conn.begin():
            return self.observer.step(conn, PassContext(now=NOW, budget=budget, llm=llm, llm_calls=llm_calls,
                                                        settings=settings))

    def send(self, step: PassStep) -> int:
        return self.observer.produced([self.writer.ask(w, WAIT_S) for w in step.writes])

    def tick(self, budget: int = 100, **kwargs: Any) -> int:
        return self.send(self.step(budget, **kwargs))

    def observations(self) -> list[Any]:
        with self.engine.connect() as conn:
            return list(conn.execute(select(m).where(m.c.type == "observation").order_by(m.c.seq)))


@pytest.fixture
def loop(store_options: StoreOptions, start_writer: Callable[..., ActorHandle]) -> Iterator[Loop]:
    engine = open_engine(store_options, "reader")
    try:
        yield Loop(engine, start_writer())
    finally:
        engine.dispose()


def chat(loop: Loop, conversation: str, *turns: tuple[str, str], agent: str = "claude", scope: str = "agent") -> None:
    for role, content in turns:
        loop.writer.ask(WriteChat(conversation_id=conversation, role=role, content=content, agent_id=agent,
                                  scope=scope), WAIT_S)


def conversation_memories(loop: Loop, *turns: tuple[str, str], session: str = "s1") -> list[str]:
    memories = tuple(NewMemory(type="conversation", content=text, metadata={"role": role, "turn": i},
                               conversation_id=session, scope="user", user_id="ana")
                     for i, (role, text) in enumerate(turns))
    return [o.id for o in loop.writer.ask(WriteMemories(memories=memories, actor="bench"), WAIT_S)]


def test_user_turns_become_observations_once_with_their_provenance(loop: Loop) -> None:
    chat(loop, "c1", ("user", "Can you help with dinner? I can't stand cilantro."),
         ("assistant", "I love cilantro-free recipes. I live in the cloud."),
         ("user", "I live in Lisbon. What is in season?"))
    assert loop.tick() == 2
    found = loop.observations()
    assert [o.content for o in found] == ['The user stated a preference: "I can\'t stand cilantro."',
                                          'The user stated a fact about themselves: "I live in Lisbon."']
    assert [(o.metadata["kind"], o.metadata["source"]["turn"], o.metadata["by"]) for o in found] == [
        ("preference", 0, "rules"), ("fact", 2, "rules")]
    assert all(o.metadata["source"]["conversation_id"] == "c1" and o.metadata["source"]["chat_id"] for o in found)
    assert loop.tick() == 0 and loop.step().seen == 0  # the watermark moved past everything read
    assert len(loop.observations()) == 2


def test_conversation_memories_link_their_observations_and_assistant_memories_are_read_past(loop: Loop) -> None:
    ids = conversation_memories(loop, ("user", "My favourite cuisine is Thai."),
                                ("assistant", "My favourite is Italian."), ("user", "We'll go with the red sofa."))
    step = loop.step()
    assert step.seen == 3 and loop.send(step) == 2
    found = loop.observations()
    assert [o.metadata["source"]["memory_id"] for o in found] == [ids[0], ids[2]]
    assert {(o.scope, o.user_id, o.conversation_id) for o in found} == {("user", "ana", "s1")}
    with loop.engine.connect() as conn:
        links = {(r.from_id, r.to_id) for r in conn.execute(select(rel).where(rel.c.type == "derived_from"))}
    assert links == {(found[0].id, ids[0]), (found[1].id, ids[2])}


def test_an_observation_of_a_private_turn_is_private_to_that_agent(loop: Loop) -> None:
    chat(loop, "c1", ("user", "I work at a bakery."), agent="codex", scope="agent")
    chat(loop, "c2", ("user", "I prefer tea."), agent="claude", scope="user")
    loop.tick()
    assert {(o.content.split('"')[1], o.scope, o.agent_id) for o in loop.observations()} == {
        ("I work at a bakery.", "agent", "codex"), ("I prefer tea.", "user", "claude")}


def test_the_same_statement_is_observed_once_per_owner_across_conversations_ticks_and_a_crash(loop: Loop) -> None:
    chat(loop, "c1", ("user", "I prefer aisle seats."))
    lost = loop.step()  # the engine dies before these writes reach the Writer
    again = loop.step()
    assert loop.send(again) == 1
    chat(loop, "c2", ("user", "i prefer aisle seats!"), ("user", "I prefer aisle seats."))
    chat(loop, "c3", ("user", "I prefer aisle seats."), agent="codex")  # another owner: its own observation
    assert loop.tick() == 1
    assert loop.send(lost) == 0  # a late request of an earlier tick writes nothing and moves the watermark nowhere
    assert [(o.agent_id, o.conversation_id) for o in loop.observations()] == [("claude", "c1"), ("codex", "c3")]
    with loop.engine.connect() as conn:
        assert loop_state.watermark(conn, "observe")["chat"] >= 4


def test_a_small_budget_reads_the_backlog_over_several_ticks(loop: Loop) -> None:
    chat(loop, "c1", *[("user", f"I have {n} bikes.") for n in range(1, 6)])
    conversation_memories(loop, ("user", "I love jazz."), ("user", "I love blues."))
    steps = []
    while not steps or steps[-1].more:
        steps.append(loop.step(budget=2))
        loop.send(steps[-1])
        assert len(steps) < 10
    assert [s.seen for s in steps] == [2, 2, 2, 1]
    assert len(loop.observations()) == 7


def test_the_budget_is_shared_so_neither_source_starves_the_other() -> None:
    assert share(10, 11, 11) == (5, 5)
    assert share(10, 2, 11) == (2, 8)
    assert share(10, 11, 1) == (9, 1)
    assert share(10, 0, 0) == (0, 0)


def _model_answer(body: dict[str, Any]) -> str:
    """The stand-in's model: finds the user's trip in item 1, and invents a statement in item 2."""
    items = body["messages"][1]["content"]
    assert "[1]" in items and body["response_format"] == {"type": "json_object"}
    return json.dumps({"observations": [
        {"item": 1, "kind": "decision", "text": "booked the night train to Vienna"},
        {"item": 2, "kind": "fact", "text": "I own a yacht"},
    ]})


def test_with_a_model_its_statements_are_written_and_invented_ones_dropped(loop: Loop) -> None:
    chat(loop, "c1", ("user", "So yes, booked the night train to Vienna for Friday."), ("user", "I like trains."))
    with ChatServer([_model_answer]) as server, OpenAIChatModel(server.url, server.model, retries=0) as llm:
        step = loop.step(llm=llm, llm_calls=1)
    assert step.llm_calls == 1 and loop.send(step) == 1
    [found] = loop.observations()
    assert found.content == 'The user stated a decision: "booked the night train to Vienna"'
    assert found.metadata["by"] == "model"


@pytest.mark.parametrize("answer", [Status(500), "not json", json.dumps({"observations": [{"item": 9}]}),
                                    json.dumps({"items": "none"})])
def test_when_the_model_fails_or_answers_badly_the_rules_observe(loop: Loop, answer: Any) -> None:
    chat(loop, "c1", ("user", "I like trains."))
    with ChatServer([answer]) as server, OpenAIChatModel(server.url, server.model, retries=0, timeout_s=5) as llm:
        step = loop.step(llm=llm, llm_calls=1)
        assert len(server.requests) == 1
    assert loop.send(step) == 1
    assert [o.metadata["by"] for o in loop.observations()] == ["rules"]


def test_batches_beyond_the_ticks_model_calls_use_the_rules(loop: Loop) -> None:
    chat(loop, "c1", ("user", "I like trains."), ("user", "I like boats."), ("user", "I like planes."))
    with ChatServer([json.dumps({"observations": [{"item": 1, "kind": "preference", "text": "I like trains"}]})]
                    ) as server, OpenAIChatModel(server.url, server.model, retries=0) as llm:
        step = loop.step(llm=llm, llm_calls=1, batch=1)
        assert len(server.requests) == 1
    assert step.llm_calls == 1 and loop.send(step) == 3
    assert [o.metadata["by"] for o in loop.observations()] == ["model", "rules", "rules"]
