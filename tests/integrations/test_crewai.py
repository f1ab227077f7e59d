"""CrewAI's unified Memory on m3 storage, with the real crewai package, offline, on each store.

crewai cannot share m3's venv (it pins mcp<2): scripts/test runs this file in the venv scripts/crewai-venv
builds, and it skips where crewai is not installed.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta

import pytest

# No telemetry from a test run (CrewAI's own switches), set before crewai is imported. Without tracing off,
# each save waits 5 s for a trace span that offline never comes.
os.environ.setdefault("CREWAI_TRACING_ENABLED", "false")
os.environ.setdefault("CREWAI_DISABLE_TELEMETRY", "true")
os.environ.setdefault("CREWAI_DISABLE_TRACKING", "true")
os.environ.setdefault("OTEL_SDK_DISABLED", "true")
pytest.importorskip("crewai")

from crewai.memory.unified_memory import Memory

from m3.errors import M3Error
from m3.gateway.service import Service
from m3.integrations.client import M3Client
from m3.integrations.crewai import M3Storage, m3_memory


@pytest.fixture
def researcher(service: Service) -> M3Client:
    return M3Client(service, "Researcher")


def remember(memory: Memory, content: str, scope: str = "/crew/research", **extra: object) -> str:
    """A record with every field given, so CrewAI asks no LLM to infer one."""
    fields = {"categories": ["market"], "importance": 0.7, **extra}
    record = memory.remember(content, scope=scope, **fields)
    assert record is not None
    return str(record.id)


def test_memory_remembers_and_recalls_through_m3_as_the_agents_role(researcher: M3Client) -> None:
    memory = m3_memory(researcher)
    kept = remember(memory, "The competitor launches its tablet in March")
    remember(memory, "The office coffee machine is broken", scope="/crew/office", categories=["office"])
    matches = memory.recall("when does the competitor launch", depth="shallow", limit=1)
    assert [m.record.id for m in matches] == [kept]
    assert matches[0].record.scope == "/crew/research" and matches[0].record.categories == ["market"]
    found = researcher.call("memory_search", {"query": "competitor tablet"})["items"]
    assert found[0]["content"] == "The competitor launches its tablet in March"
    assert found[0]["agent_id"] == "Researcher" and found[0]["importance"] == 0.7


def test_recall_stays_in_its_scope_and_categories(researcher: M3Client) -> None:
    memory = m3_memory(researcher)
    research = remember(memory, "Heron sightings doubled this spring")
    remember(memory, "Heron statues sell well in the gift shop", scope="/crew/sales", categories=["sales"])
    assert [m.record.id for m in memory.recall("heron", scope="/crew/research", depth="shallow")] == [research]
    assert [m.record.id for m in memory.recall("heron", categories=["market"], depth="shallow")] == [research]


def test_the_storage_answers_scopes_categories_counts_and_listings(researcher: M3Client) -> None:
    storage = M3Storage(researcher)
    memory = m3_memory(researcher, storage=storage)
    first = remember(memory, "Ibis nests are counted in April")
    remember(memory, "Ibis feathers are white", scope="/crew/research/birds", categories=["biology"])
    remember(memory, "Invoices go out on Fridays", scope="/crew/finance", categories=["billing"])
    assert storage.list_scopes("/") == ["/crew"]
    assert storage.list_scopes("/crew") == ["/crew/finance", "/crew/research"]
    assert storage.list_categories("/crew/research") == {"biology": 1, "market": 1}
    assert storage.count() == 3 and storage.count("/crew/research") == 2
    info = storage.get_scope_info("/crew/research")
    assert info.record_count == 2 and info.child_scopes == ["/crew/research/birds"]
    assert len(storage.list_records("/crew", limit=2)) == 2
    record = storage.get_record(first)
    assert record is not None and record.content == "Ibis nests are counted in April"
    assert storage.get_record("no-such-record") is None


def test_update_supersedes_and_forget_deletes_keeping_m3s_history(researcher: M3Client) -> None:
    memory = m3_memory(researcher)
    kept = remember(memory, "The budget is 400 euros")
    record = memory.update(kept, content="The budget is 900 euros")
    assert record.content == "The budget is 900 euros"
    current = researcher.call("memory_search", {"query": "budget euros"})["items"]
    assert [item["content"] for item in current] == ["The budget is 900 euros"]
    assert len(researcher.call("memory_history", {"id": current[0]["id"]})["versions"]) == 2
    assert memory.forget(record_ids=[kept]) == 1
    assert memory.recall("budget", depth="shallow") == []
    remember(memory, "Old news about quokkas")
    assert memory.forget(scope="/crew", older_than=datetime.utcnow() + timedelta(minutes=1)) == 1


def test_a_crews_private_memories_stay_with_their_agent_and_shared_ones_are_found(service: Service) -> None:
    writer = M3Client(service, "Writer")
    remember(m3_memory(writer), "The draft title is Moonlight Herons")
    remember(m3_memory(writer, storage=M3Storage(writer, scope="org")), "The publication date is June 3")
    other = m3_memory(M3Client(service, "Editor"))
    assert other.recall("draft title", depth="shallow") == []
    shared = M3Client(service, "Editor").call("memory_search", {"query": "publication date"})["items"]
    assert [(item["content"], item["agent_id"]) for item in shared] == [("The publication date is June 3", "Writer")]


def test_a_query_vector_from_another_embedder_is_refused_with_a_code(researcher: M3Client) -> None:
    with pytest.raises(M3Error) as raised:
        M3Storage(researcher).search([0.1, 0.2, 0.3])
    assert raised.value.code == "invalid_argument"
