"""Schema migrations: Alembic's head, the migrated schema, idempotence and concurrent first starts."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.config import Config as AlembicConfig
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Column, Engine, Integer, MetaData, Table, insert, select, text

import m3.store.engine as store_engine
from m3.store import migrations
from m3.store.engine import StoreOptions, current_revision, migrate, open_engine
from m3.store.schema import memories, memory_history
from m3.store.schema import metadata as schema_metadata
from tests.processes import race

REPO_ROOT = Path(__file__).resolve().parents[2]
FULLTEXT_TABLES = ("memories_fts", "chatlog_fts")


def _not_fulltext_or_alembic(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
    """Leave out what the schema module does not describe: alembic_version, the full-text index (FTS5
    virtual/shadow tables; tsvector columns and their GIN indexes) and the per-model HNSW indexes."""
    if name is None:
        return True
    if type_ == "table":
        return name != "alembic_version" and not name.startswith(FULLTEXT_TABLES)
    if type_ == "column":
        return not name.startswith("fts_")
    if type_ == "index":
        return "_fts_" not in name and not name.startswith("ix_embeddings_hnsw_")
    return True


def schema_diff(engine: Engine, target: MetaData) -> list[Any]:
    with engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={
            "include_object": _not_fulltext_or_alembic, "compare_type": True, "compare_server_default": True,
        })
        return list(compare_metadata(context, target))


def schema_objects(engine: Engine) -> list[tuple[Any, ...]]:
    """Every table, index, trigger and column definition as the database itself reports them."""
    with engine.connect() as conn:
        if conn.dialect.name == "sqlite":
            query = text("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY name")
        else:
            query = text(
                "SELECT 'index', indexname, tablename, indexdef FROM pg_indexes WHERE schemaname = current_schema() "
                "UNION ALL SELECT 'column', column_name, table_name, data_type || ' ' || is_nullable || ' ' || "
                "coalesce(generation_expression, '') FROM information_schema.columns "
                "WHERE table_schema = current_schema() "
                "UNION ALL SELECT 'trigger', tgname, tgrelid::regclass::text, '' FROM pg_trigger "
                "WHERE NOT tgisinternal ORDER BY 2, 3")
        rows = [tuple(r) for r in conn.execute(query)]
        conn.rollback()
        return rows


@pytest.fixture
def store_options(empty_store_url: str) -> StoreOptions:
    """Migration tests start from a store nothing was done to (PostgreSQL: an empty database)."""
    return StoreOptions(url=empty_store_url)


def test_head_names_the_newest_alembic_revision() -> None:
    cfg = AlembicConfig()
    cfg.set_main_option("script_location", str(Path(store_engine.__file__).parent / "migrations"))
    assert ScriptDirectory.from_config(cfg).get_heads() == [migrations.HEAD]


def test_migrating_an_empty_database_yields_exactly_the_schema_module(writer_engine: Engine) -> None:
    assert current_revision(writer_engine) == migrations.HEAD
    assert schema_diff(writer_engine, schema_metadata) == []


def test_the_schema_comparison_would_notice_a_missing_column(writer_engine: Engine) -> None:
    # A control for the test above: an include_object filter that hid everything would also give [].
    target = MetaData()
    for table in schema_metadata.tables.values():
        table.to_metadata(target)
    Table("memories", target, Column("not_migrated", Integer), extend_existing=True)
    Table("not_created", target, Column("id", Integer, primary_key=True))
    diff = schema_diff(writer_engine, target)
    assert ("add_table", "not_created") in [(d[0], d[1].name) for d in diff if d[0] == "add_table"]
    assert any(d[0] == "add_column" and d[3].name == "not_migrated" for d in diff)


def test_migrating_twice_changes_nothing_and_keeps_the_data(writer_engine: Engine) -> None:
    before = schema_objects(writer_engine)
    with writer_engine.begin() as conn:
        conn.execute(text("CREATE TABLE canary (x INTEGER)"))
        conn.execute(text("INSERT INTO canary VALUES (42)"))
    assert migrate(writer_engine) == migrations.HEAD
    with writer_engine.connect() as conn:
        assert conn.execute(text("SELECT x FROM canary")).scalar_one() == 42
        assert conn.execute(text("SELECT count(*) FROM alembic_version")).scalar_one() == 1
        conn.rollback()
    after = [row for row in schema_objects(writer_engine) if row[2] != "canary" and row[1] != "canary"]
    assert after == before


def test_four_threads_migrating_one_new_database_at_once_all_succeed(store_options: StoreOptions) -> None:
    barrier = threading.Barrier(4)
    results: list[str] = []
    errors: list[BaseException] = []

    def first_start() -> None:
        engine = open_engine(store_options, "writer")
        try:
            barrier.wait(timeout=30)
            results.append(migrate(engine))
        except BaseException as exc:
            errors.append(exc)
        finally:
            engine.dispose()

    threads = [threading.Thread(target=first_start) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    assert results == [migrations.HEAD] * 4
    engine = open_engine(store_options, "writer")
    try:
        assert schema_diff(engine, schema_metadata) == []
    finally:
        engine.dispose()


MIGRATE_SCRIPT = """
import sys
from m3.store.engine import StoreOptions, migrate, open_engine
engine = open_engine(StoreOptions(url=sys.argv[1]), "writer")
print("ready", flush=True)
sys.stdin.readline()
print(migrate(engine), flush=True)
"""


def test_two_processes_migrating_one_new_database_at_once_both_succeed(store_options: StoreOptions) -> None:
    env = {"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin"}
    finished = race(MIGRATE_SCRIPT, [[store_options.url]] * 2, env, timeout=60)
    for code, out, err in finished:
        assert code == 0, err
        assert out.strip() == migrations.HEAD
    engine = open_engine(store_options, "writer")
    try:
        assert schema_diff(engine, schema_metadata) == []
        with engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM alembic_version")).scalar_one() == 1
    finally:
        engine.dispose()


def test_an_unmigrated_store_reports_no_revision(store_options: StoreOptions) -> None:
    engine = open_engine(store_options, "writer")
    try:
        assert current_revision(engine) == ""
    finally:
        engine.dispose()


def test_foreign_keys_cascade_history_when_a_memory_row_goes(writer_engine: Engine) -> None:
    # The cascade is declared in the migration; it only works because connections turn foreign_keys on.
    with writer_engine.begin() as conn:
        conn.execute(insert(memories).values(
            id="m1", type="note", content="x", metadata={}, scope="agent", importance=0.5, pinned=False,
            content_hash="h", access_count=0, valid_from=_aware(), recorded_at=_aware()))
        conn.execute(insert(memory_history).values(memory_id="m1", event="created", actor="t",
                                                   at=_aware(), details={}))
        conn.execute(text("DELETE FROM memories WHERE id = 'm1'"))
        assert conn.execute(select(memory_history)).all() == []


def _aware() -> Any:
    from datetime import UTC, datetime

    return datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize("table", sorted(schema_metadata.tables))
def test_every_schema_table_exists_after_migration(writer_engine: Engine, table: str) -> None:
    with writer_engine.connect() as conn:
        assert conn.execute(text(f"SELECT count(*) FROM {table}")).scalar_one() == 0
        conn.rollback()
