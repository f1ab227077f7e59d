"""The whole cognitive loop as a user runs it: the registry's own passes on a real actor system, both stores,
the configured chat model being the stand-in server (tests/llmserver.py) over HTTP; and the command line over
the engine.

A chat turn states a preference, two notes of one owner disagree, an expired note waits for decay; one
``loop_run_once`` and each pass has done its part, seen through the tools a user calls.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from m3.actors.system import ActorSystem
from m3.cognition import observer, reflector_judge
from m3.config import Config
from m3.embed.minilm import MiniLMEmbedder
from m3.gateway.registry import default_registry
from m3.gateway.service import CallContext, Service
from tests.actors.loop_passes import HandTicker
from tests.gateway.outcomes import Run
from tests.llmserver import ChatServer

pytestmark = pytest.mark.anyio

ME = CallContext(agent_id="agent-a")
PREFERENCE = "I prefer green tea over coffee in the mornings."
OLDER, NEWER = "I have 2 cats at home.", "These days I have 3 cats at home, all rescued."
EXPIRED = "The parking permit for the old office is valid until the end of the month."


def answer(body: dict[str, Any]) -> str:
    """The stand-in's answer, by which pass asks: the Observer's items or the Reflector's pair."""
    system, user = (one["content"] for one in body["messages"])
    if system.startswith(reflector_judge.SYSTEM):
        asked = json.loads(user)
        conflict = (asked["older_note"], asked["newer_note"]) == (OLDER, NEWER)
        return json.dumps({"conflict": conflict, "reason": "cat count changed" if conflict else ""})
    assert system.startswith(observer.SYSTEM), system
    items = [json.loads(text) for text in re.findall(r"^\[\d+\] (.*)$", user, flags=re.M)]
    return json.dumps({"observations": [{"item": n, "kind": "preference", "text": PREFERENCE}
                                        for n, text in enumerate(items, 1) if PREFERENCE in text]})


@pytest.fixture
def model() -> Iterator[ChatServer]:
    server = ChatServer()
    server.default = answer  # every request, whatever its order
    with server:
        yield server


@pytest.fixture
def service(config: Config, embedder: MiniLMEmbedder, model: ChatServer) -> Iterator[Service]:
    """The registry's passes (roll-up stays off, its default), the model at the stand-in, tickers only the test fires
    (nothing runs unless asked), the governor off (this machine's load is the other tests')."""
    config = config.with_overrides(llm__url=model.url, llm__model=model.model, llm__retries=0, llm__timeout_s=10.0,
                                   loop__governor__max_load=0, loop__governor__max_writes_per_s=0)
    system = ActorSystem(config, embedder, loop_tickers={"observer": HandTicker(), "reflector": HandTicker()})
    system.start()
    yield Service(config, system, default_registry())
    system.stop()


async def call(svc: Service, tool: str, **args: Any) -> dict[str, Any]:
    done: dict[str, Any] = await svc.call(tool, args, ME)
    return done


async def ids(svc: Service, query: str, **args: Any) -> set[str]:
    return {item["id"] for item in (await call(svc, "memory_search", query=query, k=20, **args))["items"]}


async def test_one_run_of_the_loop_observes_reflects_and_archives_and_the_status_counts_it(
        service: Service, model: ChatServer) -> None:
    await call(service, "chatlog_write", conversation_id="c1", role="user", content=PREFERENCE)
    await call(service, "chatlog_write", conversation_id="c1", role="assistant", content="Noted, green tea it is.")
    older = (await call(service, "memory_write", content=OLDER, type="fact"))["id"]
    newer = (await call(service, "memory_write", content=NEWER, type="fact"))["id"]
    expired = (await call(service, "memory_write", content=EXPIRED, type="note", importance=0.05,
                          expires_at=(datetime.now(UTC) - timedelta(days=1)).isoformat()))["id"]
    service.system.wait_embedded()

    done = await call(service, "loop_run_once")
    runs = {one["name"]: one for one in done["runs"]}
    assert {name: runs[name]["error"] for name in ("observe", "reflect", "decay")} == dict.fromkeys(
        ("observe", "reflect", "decay"))

    # The Observer: the user's preference is an observation, found by search.
    found = await call(service, "memory_search", query="green tea in the morning", type="observation", k=5)
    [observed] = found["items"]
    assert PREFERENCE in observed["content"] and observed["metadata"]["by"] == "model"
    # The Reflector: the two notes are one open contradiction, in the model's words.
    [conflict] = (await call(service, "conflicts_list", kind="contradiction"))["items"]
    assert (conflict["memory_a"], conflict["memory_b"]) == (older, newer)
    assert conflict["reason"] == "model: cat count changed"
    # Decay: the expired note is archived, found only when asked for, and restored on request.
    assert expired not in await ids(service, "parking permit old office")
    assert expired in await ids(service, "parking permit old office", include_archived=True)
    archived = await call(service, "memory_get", id=expired)
    assert archived["archive_reason"] == "expired"
    await call(service, "memory_restore", id=expired, reason="still needed")
    assert expired in await ids(service, "parking permit old office")

    status = {one["name"]: one for one in (await call(service, "loop_status"))["passes"]}
    for name in ("observe", "reflect", "decay"):
        assert status[name]["runs"] == 1, name
        assert status[name]["seen"] == runs[name]["seen"] > 0, name
        assert status[name]["produced"] == runs[name]["produced"] == 1, name
    asked = {name: status[name]["llm_calls"] for name in ("observe", "reflect", "decay")}
    assert asked == {"observe": 1, "reflect": 1, "decay": 0}
    assert len(model.requests) == 2


def test_the_command_line_runs_the_loop_once_and_shows_each_passes_runs(m3: Run) -> None:
    written = m3("memory", "write", "--content", PREFERENCE, "--type", "conversation")
    assert written.status == 0, written.stderr
    ran = m3("loop", "run-once")
    assert ran.status == 0, ran.stderr
    names = [one["name"] for one in ran.document()["runs"]]
    assert {"observe", "reflect", "decay"} <= set(names)
    shown = {one["name"]: one for one in m3("loop", "status").document()["passes"]}
    assert all(shown[name]["runs"] == 1 for name in names)
    assert shown["observe"]["produced"] == 1
