"""The same history on SQLite and on PostgreSQL gives the same answers, now and ``as_of`` any past moment.

One scenario (facts superseded by similarity and explicitly, a soft
deletion, new writes) runs through the service on each store; after each
step the test notes the time. Every question is then asked ``as_of`` each
of those times on both stores, and the answers must agree. Ids and
times differ between the two runs, so answers are compared by content.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from m3.actors.system import ActorSystem
from m3.config import load_config
from m3.embed.minilm import MiniLMEmbedder
from m3.gateway.registry import default_registry
from m3.gateway.service import Service
from tests.conftest import STORES
from tests.helpers import call
from tests.pg import TestCluster

QUESTIONS = ["Which PostgreSQL version does the API use?", "database", "When do deploys happen?",
             "Where are upgrades announced?"]


def scenario(service: Service, system: ActorSystem) -> list[datetime]:
    """Run the history; return the time after each step."""
    marks: list[datetime] = []

    def step(tool: str, **args: Any) -> dict[str, Any]:
        out = call(service, tool, **args)
        system.wait_embedded()
        marks.append(datetime.now(UTC))
        return out

    step("memory_write", type="fact", content="The API uses the old PostgreSQL version")
    # supersedes by similarity
    second = step("memory_write", type="fact", content="The API uses the newest PostgreSQL version")
    note = step("memory_write", type="note", content="Database upgrades are announced in the ops channel.")
    step("memory_supersede", id=second["id"], content="We moved the API to MySQL 8.", reason="licence")
    step("memory_delete", id=note["id"], reason="obsolete")
    step("memory_write", type="procedure", content="Deploys happen on Fridays after the standup.")
    return marks


def answers(service: Service, marks: list[datetime]) -> dict[tuple[str, int], list[str]]:
    """Each question's contents, best first, as of each mark (index -1: now)."""
    found: dict[tuple[str, int], list[str]] = {}
    for question in QUESTIONS:
        for i, mark in [*enumerate(marks), (-1, None)]:
            args: dict[str, Any] = {"query": question, "k": 8}
            if mark is not None:
                args["as_of"] = mark.isoformat()
            found[(question, i)] = [item["content"] for item in call(service, "memory_search", **args)["items"]]
    return found


def run_on(url: str, home: Path, embedder: MiniLMEmbedder) -> dict[tuple[str, int], list[str]]:
    """The scenario and every question on a new store at ``url``."""
    config = load_config({**{k: v for k, v in os.environ.items() if not k.startswith("M3_")},
                          "M3_HOME": str(home), "M3_STORE_URL": url})
    system = ActorSystem(config, embedder).start()
    try:
        service = Service(config, system, default_registry())
        return answers(service, scenario(service, system))
    finally:
        system.stop()


@pytest.mark.skipif("postgres" not in STORES, reason="compares SQLite with PostgreSQL, which M3_TEST_STORES leaves out")
def test_the_same_history_gives_the_same_answers_on_both_stores_now_and_as_of_every_step(
        tmp_path: Path, m3_home: Path, embedder: MiniLMEmbedder, pg_cluster: TestCluster) -> None:
    on_sqlite = run_on(f"sqlite:///{tmp_path / 'm3.db'}", m3_home, embedder)
    url = pg_cluster.new_database()
    try:
        on_postgres = run_on(url, m3_home, embedder)
    finally:
        pg_cluster.drop(url)
    assert on_postgres == on_sqlite
    # The history did happen: the past differs from the present.
    question = QUESTIONS[0]
    assert on_sqlite[(question, 0)][:1] == ["The API uses the old PostgreSQL version"]
    assert on_sqlite[(question, 1)][:1] == ["The API uses the newest PostgreSQL version"]
    assert on_sqlite[(question, -1)][:1] == ["We moved the API to MySQL 8."]
    assert "Database upgrades are announced in the ops channel." in on_sqlite[(QUESTIONS[3], 2)]
    assert "Database upgrades are announced in the ops channel." not in on_sqlite[(QUESTIONS[3], -1)]
