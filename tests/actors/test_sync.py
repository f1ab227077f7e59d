"""Warehouse sync between SQLite stores and an embedded PostgreSQL warehouse (docs/sync.md)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, select
from sqlalchemy.pool import NullPool

from m3.actors.system import ActorSystem
from m3.config import load_config
from m3.embed.minilm import MiniLMEmbedder
from m3.errors import ConfigError, SyncNotConfigured, SyncUnsupported, WarehouseUnavailable
from m3.protocols.messages.sync import RunSync
from m3.store import schema
from m3.store.warehouse import Warehouse
from tests.actors.sync_nodes import Node, dump, node_env, nodes, sync_until_quiet, warehouse_dump
from tests.pg import TestCluster


@pytest.fixture
def warehouse(pg_cluster: TestCluster) -> Iterator[str]:
    url = pg_cluster.new_database(migrated=False)
    yield url
    pg_cluster.drop(url)


@pytest.fixture
def pair(tmp_path: Path, warehouse: str, embedder: MiniLMEmbedder) -> Iterator[tuple[Node, Node]]:
    with nodes(tmp_path, warehouse, embedder, "a", "b") as (a, b):
        yield a, b


def in_step(warehouse: str, *machines: Node) -> None:
    """Sync every node until a round moves nothing, then check every store holds what the warehouse holds."""
    sync_until_quiet(machines)
    expected = warehouse_dump(warehouse)
    for node in machines:
        assert dump(node.url) == expected, f"node {node.env['M3_IDENTITY_AGENT_ID']} differs from the warehouse"


def memory_row(node: Node, memory_id: str) -> dict[str, object] | None:
    engine = create_engine(node.url, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            row = conn.execute(select(schema.memories).where(schema.memories.c.id == memory_id)).mappings().first()
            return dict(row) if row is not None else None
    finally:
        engine.dispose()


def test_a_memory_written_on_one_machine_is_found_by_search_on_the_other(pair: tuple[Node, Node],
                                                                         warehouse: str) -> None:
    a, b = pair
    written = a.call("memory_write", content="The deploy key lives in vault path ops/deploy", type="fact", scope="org")
    in_step(warehouse, a, b)
    found = b.call("memory_search", query="where does the deploy key live", k=3)["items"]
    assert [item["id"] for item in found][:1] == [written["id"]]
    status = b.call("sync_status")
    assert status["waiting"] == 0 and status["warehouse"]["rows"] >= 3


def test_supersession_on_one_machine_and_an_edit_on_the_other_end_alike_everywhere(pair: tuple[Node, Node],
                                                                                   warehouse: str) -> None:
    a, b = pair
    old = a.call("memory_write", content="The team standup is at 9:30", type="fact", scope="org")
    in_step(warehouse, a, b)
    newer = a.call("memory_supersede", id=old["id"], content="The team standup is at 10:00")
    b.call("memory_update", id=old["id"], importance=0.9, reason="it matters")  # concurrently, on B
    in_step(warehouse, a, b)
    for node in (a, b):
        row = memory_row(node, old["id"])
        assert row is not None and row["retired_at"] is not None and row["superseded_by"] == newer["id"]
    log = a.call("sync_log")["conflicts"]
    assert [c["key"] for c in log] == [old["id"]]
    assert log[0]["loser_data"]["id"] == old["id"]  # the losing version is kept, whole
    events = [e["event"] for e in a.call("memory_history", id=old["id"])["events"]]
    assert "sync_conflict" in events


def test_an_erased_subject_never_comes_back_from_another_machine(pair: tuple[Node, Node], warehouse: str) -> None:
    a, b = pair
    kept = a.call("memory_write", content="Alice prefers tea", type="preference", scope="org", user_id="alice")
    other = a.call("memory_write", content="Bob prefers coffee", type="preference", scope="org", user_id="bob")
    in_step(warehouse, a, b)
    a.call("gdpr_forget", user_id="alice", confirm=True)
    b.call("memory_update", id=kept["id"], importance=0.8)  # B changes the erased memory before it hears of it
    in_step(warehouse, a, b)
    for node in (a, b):
        assert memory_row(node, kept["id"]) is None
        assert memory_row(node, other["id"]) is not None
    assert "Alice prefers tea" not in str(warehouse_dump(warehouse))


def test_tasks_handoffs_chat_and_agents_travel(pair: tuple[Node, Node], warehouse: str) -> None:
    a, b = pair
    b.call("agent_register", agent_id="b", role="reviewer")
    in_step(warehouse, a, b)
    task = a.call("task_create", title="Review the sync design", assignee="b")
    context = a.call("memory_write", content="The design is in docs/sync.md", type="note", scope="org")
    a.call("memory_handoff", to_agent="b", task="Review it", context_ids=[context["id"]], task_id=task["id"])
    a.call("chatlog_write", conversation_id="c1", role="user", content="please review", scope="org")
    in_step(warehouse, a, b)
    inbox = b.call("memory_inbox", agent_id="b")["items"]
    assert [item["task_id"] for item in inbox] == [task["id"]]
    updated = b.call("task_update", id=task["id"], version=task["version"], state="in_progress")
    in_step(warehouse, a, b)
    assert a.call("task_get", id=task["id"])["version"] == updated["version"]


def test_a_sync_without_a_warehouse_is_a_clear_error(tmp_path: Path, embedder: MiniLMEmbedder) -> None:
    node = Node(node_env(tmp_path, "solo", ""), embedder)
    try:
        with pytest.raises(SyncNotConfigured):
            node.system.sync.ask(RunSync(), 30)
        assert node.call("sync_status")["configured"] is False
    finally:
        node.stop()


def test_a_warehouse_password_in_the_plain_config_file_is_refused(tmp_path: Path) -> None:
    env = node_env(tmp_path, "a", "")
    env.pop("M3_SYNC_WAREHOUSE_URL")
    root = Path(env["M3_HOME"]) / "config"
    root.mkdir(parents=True)
    (root / "m3_config.toml").write_text('[sync]\nwarehouse_url = "postgresql://m3:s3cret@db.example/m3"\n')
    with pytest.raises(ConfigError, match="plain file"):
        ActorSystem(load_config(env), background=False)


def test_a_postgresql_store_does_not_sync(pg_cluster: TestCluster, warehouse: str, tmp_path: Path,
                                          embedder: MiniLMEmbedder) -> None:
    store = pg_cluster.new_database()
    env = node_env(tmp_path, "pg", warehouse)
    env["M3_STORE_URL"] = store
    node = Node(env, embedder)
    try:
        with pytest.raises(SyncUnsupported):
            node.sync()
    finally:
        node.stop()
        pg_cluster.drop(store)


def test_a_batch_the_warehouse_fails_is_retried_by_the_next_sync_with_nothing_lost_or_twice(
        pair: tuple[Node, Node], warehouse: str) -> None:
    a, b = pair
    topics = ["the build", "the coffee machine", "the parking lot", "the VPN", "payroll", "the roadmap",
              "the printer", "the wiki", "holidays", "the on-call rota", "the lunch order", "the fire drill"]
    for topic in topics:
        a.call("memory_write", content=f"A note about {topic}", type="note", scope="org")
    a.settle()
    engine = create_engine(warehouse, poolclass=NullPool)
    try:
        with engine.begin() as conn:  # the warehouse's tables exist once any node reached it
            b.sync()
            # A statement of the warehouse fails once 20 rows are in: mid-run, after some batches committed.
            conn.exec_driver_sql(
                "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN IF (SELECT count(*) FROM "
                "m3sync_rows) >= 20 THEN RAISE EXCEPTION 'disk full (a test)'; END IF; RETURN NEW; END $$;"
                "CREATE TRIGGER refuse BEFORE INSERT ON m3sync_rows FOR EACH ROW EXECUTE FUNCTION refuse();")
        with pytest.raises(WarehouseUnavailable, match="disk full"):
            a.sync()
        assert 0 < warehouse_summary(warehouse)["rows"] < 36
        with engine.begin() as conn:
            conn.exec_driver_sql("DROP TRIGGER refuse ON m3sync_rows")
    finally:
        engine.dispose()
    assert a.call("sync_log")["runs"][0]["error"].startswith("the warehouse failed: disk full")
    in_step(warehouse, a, b)  # every store holds exactly the warehouse's rows
    held = sum(len(rows) for rows in dump(a.url).values())
    assert warehouse_summary(warehouse)["rows"] == held >= 36  # 12 memories, their vectors and history lines


def test_memories_that_arrive_without_a_vector_are_embedded_where_they_arrive_and_supersede_nothing(
        tmp_path: Path, warehouse: str, embedder: MiniLMEmbedder) -> None:
    only_rows = [t for t in ("memories", "memory_history")]
    # A never supersedes by similarity; B would, were it to judge the arrivals again (it must not: they were
    # judged where they were written).
    a = Node(node_env(tmp_path, "a", warehouse, M3_SYNC_TABLES=",".join(only_rows), M3_SUPERSEDE_THRESHOLD="1.0"),
             embedder)
    b = Node(node_env(tmp_path, "b", warehouse), embedder)
    try:
        first = a.call("memory_write", content="Our office is in Lisbon", type="fact", scope="org")
        second = a.call("memory_write", content="Our office is in Lisbon now", type="fact", scope="org")
        a.settle()
        a.sync()
        b.sync()
        b.settle()
        assert b.call("embedder_status")["queued"] == 0
        found = b.call("memory_search", query="which city is the office in", k=2, explain=True)["items"]
        assert {item["id"] for item in found} == {first["id"], second["id"]}
        assert all(item["explanation"]["cosine"] is not None for item in found)  # found by meaning
        assert memory_row(b, first["id"])["retired_at"] is None  # type: ignore[index]
    finally:
        a.stop()
        b.stop()


def warehouse_summary(url: str) -> dict[str, int]:
    wh = Warehouse(url)
    try:
        return wh.summary()
    finally:
        wh.close()


def test_a_handoff_that_arrives_by_sync_wakes_the_agent_waiting_for_it(pair: tuple[Node, Node],
                                                                         warehouse: str) -> None:
    a, b = pair
    b.call("agent_register", agent_id="b")
    in_step(warehouse, a, b)
    waited: dict[str, Any] = {}
    waiter = threading.Thread(target=lambda: waited.update(b.call("notifications_wait", agent_id="b", timeout=60)))
    waiter.start()
    a.call("memory_handoff", to_agent="b", task="Take over the release notes")
    a.sync()
    b.sync()
    waiter.join(90)
    assert not waiter.is_alive()
    assert [n["kind"] for n in waited["items"]] == ["handoff"]


def test_a_task_both_machines_changed_keeps_the_losing_change_in_its_events(pair: tuple[Node, Node],
                                                                             warehouse: str) -> None:
    a, b = pair
    task = a.call("task_create", title="Write the changelog")
    in_step(warehouse, a, b)
    a.call("task_update", id=task["id"], version=task["version"], priority=5)
    b.call("task_update", id=task["id"], version=task["version"], priority=7)
    in_step(warehouse, a, b)
    events = a.call("task_get", id=task["id"], history=True)["history"]
    [line] = [e for e in events if e["event"] == "sync_conflict"]
    assert {line["details"]["loser"]["data"]["priority"], a.call("task_get", id=task["id"])["priority"]} == {5, 7}


def test_a_store_moved_to_a_new_warehouse_sends_it_everything(tmp_path: Path, warehouse: str,
                                                              pg_cluster: TestCluster,
                                                              embedder: MiniLMEmbedder) -> None:
    first = Node(node_env(tmp_path, "a", warehouse), embedder)
    try:
        first.call("memory_write", content="The backup runs at 02:00", type="fact", scope="org")
        first.settle()
        first.sync()
    finally:
        first.stop()
    fresh = pg_cluster.new_database(migrated=False)
    again = Node(node_env(tmp_path, "a", fresh), embedder)
    try:
        report = again.sync()
        assert report["pushed"] == sum(len(rows) for rows in dump(again.url).values()) >= 3
        assert warehouse_dump(fresh) == dump(again.url) == warehouse_dump(warehouse)
    finally:
        again.stop()
        pg_cluster.drop(fresh)
