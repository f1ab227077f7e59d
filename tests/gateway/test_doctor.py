"""``m3 doctor [--fix] [--json]``: each check says what is wrong and how to fix it; ``--fix`` repairs what it can.

Runs the real command in this process under a temporary M3_HOME, on each store; problems are made for real
(file modes, an empty database, a damaged SQLite file, a bad configuration file).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from m3 import config as m3_config
from m3.gateway import doctor
from tests.gateway.outcomes import Outcome, Run


@pytest.fixture
def on_store(monkeypatch: pytest.MonkeyPatch, store_url: str) -> str:
    monkeypatch.setenv("M3_STORE_URL", store_url)
    return store_url


def write_config(home: Path, text: str) -> None:
    home.mkdir(mode=0o700, exist_ok=True)
    (home / "config").mkdir(mode=0o700)
    (home / "config" / "m3_config.toml").write_text(text)


def report(outcome: Outcome, status: int = 0) -> dict[str, Any]:
    import json

    assert outcome.status == status, outcome.stderr
    document: dict[str, Any] = json.loads(outcome.stdout)
    assert "Traceback" not in outcome.stderr
    return document


def by_check(document: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for row in document["checks"]:
        found.setdefault(row["check"], []).append(row)
    return found


def statuses(document: dict[str, Any], check: str) -> list[str]:
    return [r["status"] for r in by_check(document).get(check, [])]


def test_a_healthy_installation_is_all_ok(cli: Run, on_store: str) -> None:
    cli("memory", "memory_write", "--content", "doctor test memory").document()
    document = report(cli("doctor", "--json"))
    assert document["ok"] is True and document["summary"]["fail"] == 0
    for check in ("install.python", "install.crypto", "config.load", "store.migrations", "store.integrity",
                  "embed.model", "embed.dims", "disk.free", "files.modes"):
        assert statuses(document, check) == ["ok"], (check, by_check(document).get(check))
    assert all({"check", "status", "message"} <= set(r) for r in document["checks"])
    assert {"kind": "command", "old": "m3 config set-secret", "new": "m3 secret set"} in document["renames"]


@pytest.mark.fresh_files  # the model is not kept yet
def test_doctor_says_how_search_queries_embed_and_where_their_model_is_kept(cli: Run, on_store: str,
                                                                           m3_home: Path) -> None:
    [before] = by_check(report(cli("doctor", "--json")))["embed.queries"]
    assert before["status"] == "ok" and "8-bit products" in before["message"] and "derived on the first search" \
        in before["message"]
    cli("memory", "memory_write", "--content", "The spare key hangs behind the kitchen door.").document()
    cli("memory", "memory_search", "--query", "where is the spare key").document()
    [after] = by_check(report(cli("doctor", "--json")))["embed.queries"]
    assert "kept in" in after["message"] and str(m3_home) in after["message"], after
    write_config(m3_home, "[embed]\nquery_int8 = false\n")
    [off] = by_check(report(cli("doctor", "--json")))["embed.queries"]
    assert off["status"] == "ok" and "embed exactly" in off["message"]


@pytest.mark.store_only("sqlite", reason="journal mode is SQLite's")
def test_sqlite_reports_wal(cli: Run, on_store: str) -> None:
    cli("memory", "memory_write", "--content", "x").document()
    assert statuses(report(cli("doctor", "--json")), "store.wal") == ["ok"]


@pytest.mark.store_only("postgres", reason="pgvector and index validity are PostgreSQL's")
def test_postgres_reports_pgvector_and_valid_indexes(cli: Run, on_store: str) -> None:
    document = report(cli("doctor", "--json"))
    assert statuses(document, "store.pgvector") == ["ok"]
    assert statuses(document, "store.indexes") == ["ok"]


def test_files_open_to_others_fail_and_fix_tightens_them(cli: Run, on_store: str, m3_home: Path) -> None:
    cli("secret", "set", "embed.key", stdin="k-123").document()
    (m3_home / "config").chmod(0o755)
    (m3_home / "config" / "secrets.key").chmod(0o644)
    document = report(cli("doctor", "--json"), status=1)
    failed = [r for r in by_check(document)["files.modes"] if r["status"] == "fail"]
    assert {r["message"].split(" is open")[0] for r in failed} >= {str(m3_home / "config" / "secrets.key")}
    assert all(r["fixable"] and "chmod" in r["hint"] for r in failed)
    fixed = report(cli("doctor", "--json", "--fix"))
    assert [r["status"] for r in by_check(fixed)["files.modes"]] == ["ok"]
    assert "fixed" in by_check(fixed)["files.modes"][0]
    assert (m3_home / "config" / "secrets.key").stat().st_mode & 0o777 == 0o600
    assert (m3_home / "config").stat().st_mode & 0o077 == 0o011  # search bits stay (m3/store/files.py)


def test_an_unmigrated_store_is_a_warning_that_fix_migrates(cli: Run, monkeypatch: pytest.MonkeyPatch,
                                                          empty_store_url: str) -> None:
    monkeypatch.setenv("M3_STORE_URL", empty_store_url)
    document = report(cli("doctor", "--json"))
    warned = [r for r in document["checks"] if r["check"] in ("store.exists", "store.migrations")]
    assert [r["status"] for r in warned] == ["warn"] and warned[0]["fixable"] is True
    fixed = report(cli("doctor", "--json", "--fix"))
    assert statuses(fixed, "store.migrations") == ["ok"]
    assert statuses(report(cli("doctor", "--json")), "store.migrations") == ["ok"]


@pytest.mark.store_only("sqlite", reason="damages the database file itself")
def test_a_damaged_sqlite_file_fails_with_a_hint_and_no_traceback(cli: Run, on_store: str) -> None:
    for i in range(30):
        cli("memory", "memory_write", "--content", f"memory number {i} " * 40).document()
    path = Path(on_store.removeprefix("sqlite:///"))
    data = bytearray(path.read_bytes())
    page = 4096
    for offset in range(2 * page, len(data) - page, 3 * page):
        data[offset + 100: offset + 400] = b"\xff" * 300
    path.write_bytes(bytes(data))
    document = report(cli("doctor", "--json"), status=1)
    failed = [r for r in document["checks"] if r["check"].startswith("store.") and r["status"] == "fail"]
    assert failed and all(r.get("hint") for r in failed)


def test_a_configuration_that_does_not_load_is_reported_not_raised(cli: Run, on_store: str, m3_home: Path) -> None:
    write_config(m3_home, "[search]\nkay = 5\n")
    assert cli("config", "show").error()["code"] == "config_error"
    document = report(cli("doctor", "--json"), status=1)
    assert statuses(document, "config.load") == ["fail"]
    assert "search.kay" in by_check(document)["config.keys"][0]["message"]


def test_shadowing_environment_unknown_variables_and_old_names_are_warnings(
        cli: Run, on_store: str, m3_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_config(m3_home, "[search]\nk = 5\ndefault_mmr = 0.5\n")
    monkeypatch.setenv("M3_SEARCH_K", "6")
    monkeypatch.setenv("M3_SERACH_K", "6")
    # A test-only rename, through the public table (m3 has renamed no setting yet).
    monkeypatch.setitem(m3_config.RENAMED_SETTINGS, "search.default_mmr", "search.mmr_lambda")
    document = report(cli("doctor", "--json"))
    assert "M3_SEARCH_K" in by_check(document)["config.shadowed"][0]["message"]
    assert "M3_SERACH_K" in by_check(document)["config.environment"][0]["message"]
    deprecated = by_check(document)["config.deprecated"][0]
    assert deprecated["status"] == "warn" and "search.mmr_lambda" in deprecated["hint"]
    assert {"kind": "setting", "old": "search.default_mmr", "new": "search.mmr_lambda"} in document["renames"]


def doctor_checks() -> Iterable[doctor.Check]:
    """What an extension module (the engine, `m3 setup`) provides: here, one failing check."""
    return [doctor.Check("engine", lambda config: [doctor.Finding("engine.socket", "fail", "no engine", "start it")])]


def test_an_extension_module_adds_its_checks(cli: Run, on_store: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(doctor, "EXTENSIONS", ("tests.gateway.test_doctor", "m3.gateway.not_yet_written"))
    document = report(cli("doctor", "--json"), status=1)
    assert by_check(document)["engine.socket"] == [{"check": "engine.socket", "status": "fail", "message": "no engine",
                                                    "hint": "start it"}]


def test_vectors_of_another_dimension_under_the_configured_model_fail(cli: Run, on_store: str) -> None:
    from datetime import UTC, datetime

    import numpy as np

    from m3.config import load_config
    from m3.embed.factory import configured_model
    from m3.store import vectors
    from m3.store.engine import StoreOptions, open_engine

    written = cli("memory", "memory_write", "--content", "a memory whose vector is replaced").document()
    model = configured_model(load_config())
    engine = open_engine(StoreOptions(url=on_store), "writer")
    try:  # as an endpoint that changed its model behind the same name would have stored it
        with engine.begin() as conn:
            vectors.store(conn, model, 8, [written["id"]], np.ones((1, 8), np.float32), datetime.now(UTC),
                          {written["id"]: True})
    finally:
        engine.dispose()
    document = report(cli("doctor", "--json"), status=1)
    dims = by_check(document)["embed.dims"]
    assert [r["status"] for r in dims] == ["fail"] and "reembed" in dims[0]["hint"]


def test_a_configured_model_without_its_files_fails_and_search_on_another_model_warns(
        cli: Run, on_store: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    cli("memory", "memory_write", "--content", "written with the default model").document()
    monkeypatch.setenv("M3_EMBED_BACKEND", "bge-m3")
    monkeypatch.setenv("M3_EMBED_MODEL_DIR", str(tmp_path / "no-model"))
    document = report(cli("doctor", "--json"), status=1)
    model = by_check(document)["embed.model"][0]
    assert model["status"] == "fail" and "m3 embedder fetch-model" in model["hint"]
    assert statuses(document, "embed.active") == ["warn"]


def test_fix_tightens_and_migrates_a_plaintext_secrets_file_that_kept_m3_from_starting(
        cli: Run, on_store: str, m3_home: Path) -> None:
    write_config(m3_home, "")
    plain = m3_home / "config" / "secrets.toml"
    plain.write_text('[embed]\nkey = "k-plain-123"\n')
    plain.chmod(0o644)
    assert cli("config", "show").error()["code"] == "config_error"
    assert statuses(report(cli("doctor", "--json"), status=1), "config.load") == ["fail"]
    fixed = report(cli("doctor", "--json", "--fix"))
    assert "fixed" in by_check(fixed)["files.modes"][0]
    assert statuses(fixed, "config.load") == ["ok"]
    assert not plain.exists()
    assert cli("secret", "get", "embed.key").document()["value"] == "k-plain-123"


def test_the_report_for_a_person_names_each_problem_and_its_hint() -> None:
    document = {"ok": False, "summary": {"ok": 1, "warn": 0, "fail": 1}, "checks": [
        {"check": "disk.free", "status": "ok", "message": "9 GiB free"},
        {"check": "files.modes", "status": "fail", "message": "x is open", "hint": "chmod 600 x", "fixable": True}]}
    shown = doctor.text(document)
    assert "fail  files.modes" in shown and "-> chmod 600 x" in shown and "m3 doctor --fix" in shown


def test_agent_wiring_warns_for_a_client_without_m3_until_m3_setup_adds_it(
        cli: Run, on_store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "user"
    (home / ".cursor").mkdir(parents=True)
    (home / ".cursor" / "mcp.json").write_text('{"mcpServers": {"other": {"command": "x"}}}')
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    [before] = by_check(report(cli("doctor", "--json")))["setup.wiring"]
    assert before["status"] == "warn" and "Cursor" in before["message"] and "m3 setup" in before["hint"]
    assert cli("setup", "--json", "--client", "cursor").status == 0
    [after] = by_check(report(cli("doctor", "--json")))["setup.wiring"]
    assert after["status"] == "ok" and "Cursor" in after["message"]


def test_the_engine_checks_say_whether_one_runs_and_flag_a_socket_open_to_others(
        cli: Run, on_store: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("M3_ENGINE_MODE", "engine")
    [idle] = by_check(report(cli("doctor", "--json")))["engine.status"]
    assert idle["status"] == "ok" and "no engine runs" in idle["message"]
    cli("memory", "memory_write", "--content", "doctor engine test").document()  # starts the engine
    document = report(cli("doctor", "--json"))
    [running] = by_check(document)["engine.status"]
    assert running["status"] == "ok" and "the engine runs" in running["message"]
    sock = Path(cli("engine", "status").document()["socket"])
    sock.chmod(0o666)
    [opened] = by_check(report(cli("doctor", "--json"), status=1))["engine.files"]
    assert opened["status"] == "fail" and "chmod 600" in opened["hint"]
