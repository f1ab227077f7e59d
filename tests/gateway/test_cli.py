"""The command line's JSON contract: one JSON document on stdout, coded errors on stderr, exit 0/1/2.

The core flows run ``m3`` as a real subprocess (each start costs seconds, so
there are few). Behaviour that needs no fork calls ``m3.gateway.cli.main``
in this process: the same code, config loading and store, without the spawn.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from m3 import __version__
from m3.actors.supervisor import ActorHandle
from m3.gateway.cli import main
from m3.store import schema
from tests.actors.conftest import WAIT_S, write_one
from tests.gateway.outcomes import Outcome, Run


@pytest.fixture
def cli(env: dict[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        isolated_logging: None) -> Run:
    """Run ``m3 …`` in this process (``main(argv)``) with the same environment as the subprocesses."""
    monkeypatch.setenv("M3_STORE_URL", env["M3_STORE_URL"])

    def run(*argv: str) -> Outcome:
        capsys.readouterr()
        status = main(list(argv))
        out, err = capsys.readouterr()
        return Outcome(status, out, err)
    return run


@pytest.fixture
def stored_rows(store_url: str) -> Iterator[Callable[[], int]]:
    """Count memory rows and history events in the store, read directly."""
    engine = sa.create_engine(store_url)

    def count() -> int:
        with engine.connect() as conn:
            if not sa.inspect(conn).has_table("memories"):
                return 0
            memories = conn.execute(sa.select(sa.func.count()).select_from(schema.memories)).scalar_one()
            events = conn.execute(sa.select(sa.func.count()).select_from(schema.memory_history)).scalar_one()
            return int(memories) + int(events)
    yield count
    engine.dispose()


# --- subprocesses: the core flows ---------------------------------------------------------------

def test_a_decision_written_by_one_process_is_found_by_meaning_by_the_next(m3: Run) -> None:
    written = m3("memory", "memory_write", "--type", "decision", "--title", "project-database",
                 "--content", "We chose PostgreSQL for our website.").document()
    assert written["created"] is True
    found = m3("memory", "memory_search", "--query", "Which database did we decide to use?", "--k", "1").document()
    assert [item["id"] for item in found["items"]] == [written["id"]]
    # No query word occurs in the text: only the vector, finished before the writer exited, can find it.
    assert found["items"][0]["bm25_score"] == 0
    assert found["items"][0]["score"] > 0


def test_arguments_come_from_json_on_stdin_and_flags_given_beside_it_win(m3: Run, cli: Run) -> None:
    arguments = {"content": "The user prefers dark mode.", "type": "preference", "importance": 0.1}
    written = m3("memory", "write", "--json-file", "-", "--importance", "0.9", stdin=json.dumps(arguments)).document()
    record = cli("memory", "get", "--id", written["id"]).document()
    assert (record["content"], record["type"], record["importance"]) == ("The user prefers dark mode.",
                                                                          "preference", 0.9)


def test_a_failed_call_prints_a_coded_json_error_on_stderr_and_exits_1(m3: Run) -> None:
    error = m3("memory", "get", "--id", "deadbeef00").error()
    assert error["code"] == "not_found"
    assert "deadbeef00" in error["message"]


def test_an_unknown_command_is_a_usage_error_with_exit_status_2(m3: Run) -> None:
    assert m3("memory", "teleport", "--id", "deadbeef00").error(status=2)["code"] == "usage_error"


def test_python_dash_m_m3_is_the_same_program_and_reports_its_version(child_env: dict[str, str]) -> None:
    done = subprocess.run([sys.executable, "-m", "m3", "--version"], env=child_env, capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.strip() == f"m3 {__version__}"


# --- in process: usage, configuration, bad input ------------------------------------------------

def test_memory_restore_brings_back_a_deleted_memory_and_refuses_a_current_one(cli: Run) -> None:
    written = cli("memory", "write", "--content", "The VPN needs a hardware token.").document()
    cli("memory", "delete", "--id", written["id"])
    restored = cli("memory", "restore", "--id", written["id"][:8], "--reason", "still true").document()
    assert restored == {"id": written["id"], "retired_id": None}
    assert cli("memory", "restore", "--id", written["id"]).error()["code"] == "not_retired"


@pytest.mark.parametrize("argv", [
    ["teleport"],
    ["memory"],
    ["memory", "write", "--content", "x", "--colour", "red"],
    ["memory", "write", "--content"],
    ["config", "set", "search.k"],
])
def test_a_command_line_that_does_not_parse_exits_2(cli: Run, argv: list[str], stored_rows: Callable[[], int]
                                                   ) -> None:
    assert cli(*argv).error(status=2)["code"] == "usage_error"
    assert stored_rows() == 0


@pytest.mark.parametrize(("argv", "code"), [
    (["memory", "write", "--content", "x", "--type", "nonsense"], "unknown_memory_type"),
    (["memory", "write", "--content", ""], "invalid_argument"),
    (["memory", "write", "--content", "x" * 100_001], "content_too_large"),
    (["memory", "write", "--content", "x", "--metadata", "{not json"], "invalid_argument"),
    (["memory", "get", "--id", "deadbeef00"], "not_found"),
    (["memory", "pin", "--id", "deadbeef00"], "not_found"),
    (["memory", "search", "--query", "x", "--as_of", "last tuesday"], "invalid_time"),
    (["memory", "search", "--query", "x", "--k", "-1"], "invalid_argument"),
])
def test_bad_input_gets_its_code_exit_1_and_writes_nothing(cli: Run, stored_rows: Callable[[], int],
                                                           argv: list[str], code: str) -> None:
    assert cli(*argv).error()["code"] == code
    assert stored_rows() == 0


@pytest.mark.parametrize("stdin", ["", "[1, 2]", "{not json"])
def test_json_on_stdin_must_be_one_object_of_arguments(cli: Run, monkeypatch: pytest.MonkeyPatch,
                                                       stored_rows: Callable[[], int], stdin: str) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    assert cli("memory", "write", "--json-file", "-").error()["code"] == "invalid_argument"
    assert stored_rows() == 0


def test_flags_take_kebab_case_names_bare_booleans_and_json_values(cli: Run) -> None:
    written = cli("memory", "write", "--content", "Standup is at 9:30.", "--pinned", "--metadata", '{"team": "ops"}',
                  "--conversation-id", "conv-7").document()
    record = cli("memory", "get", "--id", written["id"][:8]).document()
    assert (record["pinned"], record["metadata"], record["conversation_id"]) == (True, {"team": "ops"}, "conv-7")


def test_tool_arguments_named_domain_or_tool_are_arguments_not_the_command_line_s_own(cli: Run) -> None:
    assert len(cli("tools", "m3_index").document()["tools"]) > 40
    assert {t["domain"] for t in cli("tools", "m3_index", "--domain", "task").document()["tools"]} == {"task"}
    written = cli("memory", "write", "--content", "Reached through m3_call.").document()
    called = cli("tools", "m3_call", "--tool", "memory_get", "--args", json.dumps({"id": written["id"]})).document()
    assert (called["tool"], called["result"]["content"]) == ("memory_get", "Reached through m3_call.")


def test_config_show_origin_labels_each_value_default_file_or_environment(
        cli: Run, env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    config_file = Path(cli("config", "show").document()["file"])
    config_file.parent.mkdir(parents=True)
    config_file.write_text("[search]\nk = 3\ncandidates = 40\n", encoding="utf-8")
    monkeypatch.setenv("M3_SEARCH_CANDIDATES", "50")
    settings = cli("config", "show", "--origin").document()["settings"]
    assert settings["search.k"] == {"value": 3, "origin": "file", "env": "M3_SEARCH_K"}
    assert settings["search.candidates"] == {"value": 50, "origin": "env", "env": "M3_SEARCH_CANDIDATES"}
    assert settings["search.mmr_lambda"] == {"value": 0.8, "origin": "default", "env": "M3_SEARCH_MMR_LAMBDA"}
    # store.url comes from the environment here, and is a secret.
    assert settings["store.url"] == {"value": "<set, hidden>", "origin": "env", "env": "M3_STORE_URL"}
    assert env["M3_STORE_URL"] not in cli("config", "show", "--origin").stdout


def test_config_set_writes_the_file_and_show_then_names_the_file_as_origin(cli: Run) -> None:
    assert cli("config", "set", "search.k", "5").document()["value"] == 5
    settings = cli("config", "show", "--origin").document()["settings"]
    assert settings["search.k"]["value"] == 5
    assert settings["search.k"]["origin"] == "file"
    assert cli("config", "show").document()["settings"]["search.k"] == 5


def test_a_secret_setting_is_stored_but_never_printed(cli: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("M3_STORE_URL")
    secret = "postgresql+psycopg://m3:s3cret@db.example/m3"
    assert cli("config", "set", "store.url", secret).document()["value"] == "<set, hidden>"
    shown = cli("config", "show", "--origin")
    assert shown.document()["settings"]["store.url"] == {"value": "<set, hidden>", "origin": "file",
                                                         "env": "M3_STORE_URL"}
    assert "s3cret" not in shown.stdout
    assert "s3cret" in Path(shown.document()["file"]).read_text(encoding="utf-8")


@pytest.mark.parametrize(("argv", "code"), [
    (["config", "set", "search.kk", "5"], "config_error"),
    (["config", "set", "search.k", "five"], "config_error"),
])
def test_a_bad_setting_is_a_config_error_and_changes_nothing(cli: Run, argv: list[str], code: str) -> None:
    assert cli(*argv).error()["code"] == code
    assert cli("config", "show", "--origin").document()["settings"]["search.k"]["origin"] == "default"


def test_a_one_shot_write_on_a_store_with_a_backlog_embeds_only_its_own_memory(
        m3: Run, child_env: dict[str, str], start_writer: Callable[..., ActorHandle], store_url: str) -> None:
    """In embedded mode (with the engine, the engine works through the backlog: tests/gateway/engine)."""
    child_env["M3_ENGINE_MODE"] = "embedded"
    writer = start_writer()
    backlog = [writer.ask(write_one(f"Backlog note number {i} about the quarterly plan."), WAIT_S)[0].id
               for i in range(40)]
    writer.stop(timeout=WAIT_S)
    own = m3("memory", "write", "--type", "note", "--content", "The courier comes on Thursdays.").document()["id"]
    e = schema.memory_embeddings
    engine = sa.create_engine(store_url)
    try:
        with engine.connect() as conn:
            embedded = set(conn.execute(sa.select(e.c.memory_id)).scalars())
    finally:
        engine.dispose()
    # The long-running processes (and the next `m3` server) work through the backlog; this one did not.
    assert embedded == {own}
    assert not embedded & set(backlog)
