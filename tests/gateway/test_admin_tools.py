"""The admin tools: a store exported and imported across SQLite and PostgreSQL losing nothing, integrity checks,
maintenance, the embedding backlog, the engine's status, and the refusal of token-bound callers."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from m3.actors.system import ActorSystem
from m3.config import load_config
from m3.embed.minilm import MiniLMEmbedder
from m3.errors import M3Error
from m3.gateway.registry import default_registry
from m3.gateway.service import CallContext, Service
from m3.store import dump
from m3.store.dump_writes import STATE_TABLES
from m3.store.engine import StoreOptions, open_engine
from m3.store.migrations import HEAD
from tests.gateway.outcomes import Run
from tests.helpers import call

LOCAL = CallContext(agent_id="local")
OTHER = CallContext(agent_id="other")


def code_of(service: Service, tool: str, ctx: CallContext = LOCAL, **args: Any) -> str:
    with pytest.raises(M3Error) as raised:
        call(service, tool, ctx, **args)
    return raised.value.code


def fill(service: Service) -> None:
    """A bit of everything that travels: versions, links, grants, vectors, chat, agents, tasks, inbox, audit."""
    call(service, "agent_register", LOCAL)
    call(service, "agent_register", OTHER)
    first = call(service, "memory_write", LOCAL, content="The boiler is serviced in October.", scope="agent")
    second = call(service, "memory_write", LOCAL, content="The spare key is under the blue pot.", title="Key")
    call(service, "memory_update", LOCAL, id=second["id"], content="The spare key is under the red pot.")
    call(service, "memory_link", LOCAL, from_id=first["id"], to_id=second["id"], type="related")
    call(service, "memory_share", LOCAL, id=first["id"], agents=["other"])
    call(service, "chatlog_write", LOCAL, conversation_id="c1", role="user", content="Where is the key?")
    task = call(service, "task_create", LOCAL, title="Service the boiler")
    call(service, "task_assign", LOCAL, id=task["id"], version=task["version"], assignee="other")
    call(service, "memory_handoff", LOCAL, to_agent="other", task="Check the boiler", context_ids=[first["id"]])
    call(service, "notify", LOCAL, to_agent="other", message="The boiler needs you.")
    call(service, "memory_search", LOCAL, query="spare key")
    service.system.wait_embedded()


def tables_of(url: str) -> dict[str, list[dict[str, Any]]]:
    """Every row of every table, encoded as an export writes it (JSON values, base64 vectors)."""
    engine = open_engine(StoreOptions(url=url), "reader")
    try:
        with engine.connect() as conn:
            return {t.name: list(dump.rows_of(conn, t)) for t in dump.TABLES}
    finally:
        engine.dispose()


def content_rows(url: str) -> int:
    """Rows of every table but the store's own state (a started store records its embedding model)."""
    return sum(len(rows) for name, rows in tables_of(url).items() if name not in STATE_TABLES)


@pytest.fixture
def other_store(request: pytest.FixtureRequest, store_kind: str, tmp_path: Path) -> Iterator[str]:
    """A new, migrated store of the other backend than the one under test."""
    if store_kind == "postgres":
        yield f"sqlite:///{tmp_path / 'other.db'}"
        return
    cluster = request.getfixturevalue("pg_cluster")
    url = cluster.new_database(migrated=True)
    yield url
    cluster.drop(url)


@pytest.fixture
def other_service(env: dict[str, str], other_store: str, embedder: MiniLMEmbedder) -> Iterator[Service]:
    config = load_config({**env, "M3_STORE_URL": other_store})
    system = ActorSystem(config, embedder).start()
    yield Service(config, system, default_registry())
    system.stop()


def test_a_store_moves_to_the_other_backend_and_back_row_for_row(service: Service, other_service: Service,
                                                                   store_url: str, other_store: str,
                                                                   tmp_path: Path) -> None:
    fill(service)
    there = tmp_path / "store.jsonl"
    exported = call(service, "admin_export", path=str(there))
    assert exported["revision"] == HEAD and exported["rows"] == sum(exported["tables"].values())
    assert exported["tables"]["memories"] == 3 and exported["tables"]["memory_embeddings"] >= 2
    assert there.stat().st_mode & 0o777 == 0o600
    header = json.loads(there.read_text(encoding="utf-8").splitlines()[0])
    assert (header["format"], header["revision"]) == ("m3-export", HEAD)

    imported = call(other_service, "admin_import", path=str(there))
    assert imported["imported"] == exported["tables"]
    assert tables_of(other_store) == tables_of(store_url)

    back = tmp_path / "back.jsonl"
    call(other_service, "admin_export", path=str(back))
    # The same rows whichever backend wrote them (JSON compared parsed: PostgreSQL's JSONB orders keys its own way).
    assert [json.loads(line) for line in there.read_text().splitlines()[1:]] == [
        json.loads(line) for line in back.read_text().splitlines()[1:]]
    # The imported store works as the first did: search finds by keyword and vector, the grant still holds.
    found = call(other_service, "memory_search", OTHER, query="boiler serviced")
    assert [item["content"] for item in found["items"]][:1] == ["The boiler is serviced in October."]
    report = call(other_service, "admin_verify")
    assert report["ok"] is True, [c for c in report["checks"] if c["status"] != "ok"]
    # New rows follow the imported ones (PostgreSQL's sequences were moved past the imported seq values).
    call(other_service, "memory_write", LOCAL, content="Written after the move.")
    call(other_service, "chatlog_write", LOCAL, conversation_id="c1", role="assistant", content="Under the red pot.")


@pytest.mark.store_only("sqlite", reason="the import goes to the other backend, and only PostgreSQL keeps statistics")
def test_an_import_into_postgresql_leaves_the_planner_statistics_of_what_it_wrote(
        service: Service, other_service: Service, other_store: str, tmp_path: Path) -> None:
    fill(service)
    there = tmp_path / "store.jsonl"
    call(service, "admin_export", path=str(there))
    imported = call(other_service, "admin_import", path=str(there))["imported"]
    engine = open_engine(StoreOptions(url=other_store), "reader")
    try:
        with engine.connect() as conn:
            analyzed = dict(conn.execute(text(  # manual ANALYZE only: autovacuum's would be last_autoanalyze
                "SELECT relname, last_analyze IS NOT NULL FROM pg_stat_user_tables")).all())
            rows = conn.execute(text("SELECT reltuples FROM pg_class WHERE relname = 'memories'")).scalar_one()
    finally:
        engine.dispose()
    assert {t: analyzed[t] for t in imported} == {t: n > 0 for t, n in imported.items()}
    assert imported["memories"] == rows == 3 and imported["memory_embeddings"] > 0
    assert not all(n > 0 for n in imported.values())  # some tables were left alone


def test_merge_adds_another_stores_rows_beside_its_own(service: Service, other_service: Service,
                                                       other_store: str, tmp_path: Path) -> None:
    fill(service)
    there = tmp_path / "store.jsonl"
    call(service, "admin_export", path=str(there))
    own = call(other_service, "memory_write", LOCAL, content="The other store's own note about the garden.")
    merged = call(other_service, "admin_import", path=str(there), merge=True)
    assert merged["imported"]["memories"] == 3 and merged["skipped"]["memories"] == 0
    memories = tables_of(other_store)["memories"]
    assert len(memories) == 4 and own["id"] in {m["id"] for m in memories}
    assert len({m["seq"] for m in memories}) == 4
    again = call(other_service, "admin_import", path=str(there), merge=True)
    assert again["rows"] == 0  # a second merge of the same file adds nothing
    found = call(other_service, "memory_search", LOCAL, query="spare key")
    assert found["items"][0]["content"] == "The spare key is under the red pot."


def test_import_refuses_a_store_that_holds_rows_and_merge_adds_only_what_is_missing(
        service: Service, tmp_path: Path, store_url: str) -> None:
    fill(service)
    there = tmp_path / "store.jsonl"
    call(service, "admin_export", path=str(there))
    before = tables_of(store_url)
    with pytest.raises(M3Error) as raised:
        call(service, "admin_import", path=str(there))
    assert raised.value.code == "store_not_empty" and raised.value.details["tables"]["memories"] == 3
    assert tables_of(store_url) == before
    merged = call(service, "admin_import", path=str(there), merge=True)
    assert merged["rows"] == 0 and merged["skipped"]["memories"] == 3
    assert tables_of(store_url) == before


def write_lines(path: Path, *items: Any) -> str:
    path.write_text("\n".join(i if isinstance(i, str) else json.dumps(i) for i in items) + "\n", encoding="utf-8")
    return str(path)


def test_import_gives_coded_errors_for_a_bad_file_another_revision_and_writes_nothing(
        service: Service, tmp_path: Path, store_url: str) -> None:
    head = {"format": "m3-export", "format_version": 1, "revision": HEAD}
    memory = {"table": "memories", "row": {"id": "x"}}
    bad = {
        "invalid_export": [write_lines(tmp_path / "a", "not json"), write_lines(tmp_path / "b", {"hello": 1}),
                           write_lines(tmp_path / "c", head, {"table": "nope", "row": {}}),
                           write_lines(tmp_path / "d", head, memory)],
        "export_too_new": [write_lines(tmp_path / "e", {**head, "revision": "9999_from_the_future"})],
        "export_revision_mismatch": [write_lines(tmp_path / "f", {**head, "revision": "0006"})],
    }
    for code, paths in bad.items():
        for path in paths:
            assert code_of(service, "admin_import", path=path) == code, path
    assert code_of(service, "admin_import", path="relative/file.jsonl") == "invalid_argument"
    assert code_of(service, "admin_import", path=str(tmp_path / "missing.jsonl")) == "invalid_argument"
    assert content_rows(store_url) == 0
    inspected = call(service, "admin_export_inspect", path=bad["export_too_new"][0])
    assert inspected["importable"] is False and inspected["problem"]["code"] == "export_too_new"


def test_an_import_that_fails_half_way_leaves_nothing(service: Service, other_service: Service, other_store: str,
                                                      tmp_path: Path) -> None:
    fill(service)
    there = tmp_path / "store.jsonl"
    call(service, "admin_export", path=str(there))
    lines = there.read_text(encoding="utf-8").splitlines()
    # The last line again: valid alone, but its seq is taken by then, after every other row was inserted.
    twice = write_lines(tmp_path / "twice.jsonl", *lines, lines[-1])
    with pytest.raises(M3Error) as raised:
        call(other_service, "admin_import", path=twice)
    assert raised.value.code != "internal_error"
    assert content_rows(other_store) == 0


def test_admin_tools_refuse_a_caller_bound_by_a_token(service: Service, tmp_path: Path) -> None:
    bound = CallContext(agent_id="local", bound=True)
    for tool, args in (("admin_export", {"path": str(tmp_path / "x.jsonl")}), ("admin_verify", {}),
                       ("admin_optimise", {}), ("admin_engine_status", {}), ("admin_embedding_backlog", {})):
        with pytest.raises(M3Error) as raised:
            call(service, tool, bound, **args)
        assert raised.value.code == "forbidden" and "local user" in raised.value.message
    assert not (tmp_path / "x.jsonl").exists()


def test_verify_reports_a_content_changed_behind_m3s_back_and_fixes_nothing(service: Service, store_url: str) -> None:
    written = call(service, "memory_write", content="The meter reads 4711.")
    service.system.wait_embedded()
    healthy = call(service, "admin_verify", full=True)
    assert healthy["ok"] is True and healthy["problems"] == 0
    assert {"memories.content_hash", "links"} <= {c["check"] for c in healthy["checks"]}
    engine = open_engine(StoreOptions(url=store_url), "writer")
    with engine.begin() as conn:
        conn.execute(text("UPDATE memories SET content = 'The meter reads 9999.' WHERE id = :id"),
                     {"id": written["id"]})
    engine.dispose()
    report = call(service, "admin_verify")
    hashes = next(c for c in report["checks"] if c["check"] == "memories.content_hash")
    assert report["ok"] is False and hashes["status"] == "fail" and hashes["ids"] == [written["id"]]
    assert "9999" not in json.dumps(report)  # ids, never content
    assert call(service, "admin_verify")["ok"] is False  # reported again: nothing was repaired


def test_verify_stays_ok_while_another_process_keeps_writing(service: Service, store_url: str) -> None:
    """The full-text check waits for the write lock instead of failing on a snapshot another write made stale."""
    call(service, "agent_register", OTHER)
    call(service, "memory_write_bulk", memories=[
        {"content": f"Reading number {n} of the water meter, taken on day {n % 31}."} for n in range(500)])
    stop, failures = threading.Event(), []
    engine = open_engine(StoreOptions(url=store_url), "writer")  # another process's connection, as a heartbeat

    def keep_writing() -> None:
        n = 0
        while not stop.is_set():
            n += 1
            with engine.begin() as conn:
                conn.execute(text("UPDATE agents SET role = :role WHERE id = 'other'"), {"role": f"meter {n}"})

    writer = threading.Thread(target=keep_writing)
    writer.start()
    try:
        for _ in range(20):
            report = call(service, "admin_verify")
            failures += [c for c in report["checks"] if c["status"] != "ok"]
    finally:
        stop.set()
        writer.join(timeout=30)
        engine.dispose()
    assert failures == []


def test_optimise_runs_the_backends_maintenance_and_the_store_still_answers(service: Service) -> None:
    call(service, "memory_write", content="Optimised stores still find the heat pump.")
    done = call(service, "admin_optimise", vacuum=True, rebuild_fulltext=True)
    assert done["statements"] and done["backend"] in {"sqlite", "postgresql"}
    assert any("VACUUM" in s for s in done["statements"])
    assert call(service, "memory_search", query="heat pump")["count"] == 1


def test_backlog_and_reembed_show_what_waits_for_a_vector_per_model(service: Service) -> None:
    call(service, "memory_write", content="A memory that gets its vector soon.")
    service.system.wait_embedded()
    backlog = call(service, "admin_embedding_backlog", limit=5)
    first = backlog["models"][0]
    assert first["model"] == backlog["configured_model"] and first["pending"] == 0 and first["oldest"] == []
    started = call(service, "admin_reembed")
    assert (started["model"], started["pending"], started["started"]) == (backlog["configured_model"], 0, True)
    assert code_of(service, "admin_reembed", model="some-other-model") == "invalid_argument"


def test_engine_status_says_when_m3_runs_embedded(service: Service) -> None:
    status = call(service, "admin_engine_status")
    assert status["mode"] == "embedded" and status["socket"] is None and status["uptime_s"] >= 0


def test_the_cli_exports_and_imports_a_store_by_file(env: dict[str, str], cli: Run, monkeypatch: pytest.MonkeyPatch,
                                                     tmp_path: Path, other_store: str) -> None:
    monkeypatch.setenv("M3_STORE_URL", env["M3_STORE_URL"])
    cli("memory", "write", "--content", "Carried over by the command line.").document()
    monkeypatch.chdir(tmp_path)
    exported = cli("store", "export", "--out", "moved.jsonl").document()  # relative: resolved by the CLI
    assert exported["path"] == str(tmp_path / "moved.jsonl") and exported["tables"]["memories"] == 1
    assert cli("store", "export", "--out", "moved.jsonl").error()["code"] == "invalid_argument"  # exists
    monkeypatch.setenv("M3_STORE_URL", other_store)
    imported = cli("store", "import", "--in", "moved.jsonl").document()
    assert imported["imported"]["memories"] == 1
    assert cli("store", "import", "--in", "moved.jsonl").error()["code"] == "store_not_empty"
    assert cli("store", "import", "--in", "moved.jsonl", "--merge").document()["skipped"]["memories"] == 1
    found = cli("memory", "search", "--query", "command line").document()
    assert [item["content"] for item in found["items"]] == ["Carried over by the command line."]


def test_engine_status_names_the_engine_a_front_end_talks_to(m3: Run) -> None:
    status = m3("admin", "engine_status").document()
    assert status["mode"] == "engine" and status["socket"].endswith(".sock") and status["pid"] > 0
    assert status["requests"] >= 1 and status["uptime_s"] >= 0
    health = m3("diagnostics", "health").document()
    assert next(c for c in health["checks"] if c["check"] == "engine")["message"].startswith(
        f"engine pid {status['pid']}")


@pytest.mark.store_only("sqlite", reason="FTS5 tables are SQLite's; PostgreSQL's tsvector columns are generated")
def test_verify_finds_a_full_text_index_out_of_step_and_optimise_rebuilds_it(service: Service,
                                                                              store_url: str) -> None:
    call(service, "memory_write", content="The heat pump hums at night.")
    engine = open_engine(StoreOptions(url=store_url), "writer")
    with engine.begin() as conn:  # the index loses the row behind m3's back; the table keeps it
        conn.execute(text("INSERT INTO memories_fts(memories_fts, rowid, title, content) "
                          "SELECT 'delete', seq, coalesce(title, ''), content FROM memories"))
    engine.dispose()
    fts = next(c for c in call(service, "admin_verify")["checks"] if c["check"] == "fts.memories_fts")
    assert fts["status"] == "fail" and "rebuild_fulltext" in fts["hint"]
    call(service, "admin_optimise", rebuild_fulltext=True)
    assert call(service, "admin_verify")["ok"] is True
    assert call(service, "memory_search", query="heat pump")["count"] == 1
