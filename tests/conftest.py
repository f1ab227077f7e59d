"""Shared fixtures: a temporary M3_HOME, the store under test, a started m3.

Every test runs under its own temporary home, never ``~/.m3``. The real
offline embedder is loaded once per session and shared (it is immutable
and thread-safe). ``store_url`` is the one place that chooses the store;
tests that take it (directly or through ``config``) run on each store in
``STORES``: a new SQLite file, or a new database on the session's embedded
PostgreSQL (started by the first test that needs it, see ``tests/pg.py``).
A test that only makes sense on one store says so with
``@pytest.mark.store_only("sqlite", reason=…)``; it is skipped on the other
with that reason. The end of the run reports how many store tests ran on
each store.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from m3 import __version__
from m3.actors.system import ActorSystem
from m3.config import Config, load_config
from m3.embed.minilm import MiniLMEmbedder
from m3.gateway.engine import manifest
from m3.gateway.registry import default_registry
from m3.gateway.service import Service
from m3.store.engine import StoreOptions, migrate_store
from tests.engines import stop_engines
from tests.pg import TestCluster

#: Every store the suite runs on; M3_TEST_STORES=sqlite narrows it while iterating (CI runs both).
STORES = [s for s in os.environ.get("M3_TEST_STORES", "sqlite,postgres").split(",") if s]
#: M3_* variables of the run itself that the fixtures keep: the search path under test (scripts/test runs
#: the retrieval tests a second time with M3_SEARCH_NATIVE=off).
KEPT_ENV = ("M3_SEARCH_NATIVE",)
STORE_NAMES = {"sqlite": "SQLite", "postgres": "PostgreSQL"}


@pytest.fixture(scope="session")
def embedder() -> MiniLMEmbedder:
    model = MiniLMEmbedder()
    model.load()
    return model


@pytest.fixture(scope="session")
def tool_manifest() -> bytes | None:
    """The tool manifest of this m3, built once per test process (m3.gateway.engine.manifest); None where the
    MCP SDK 2 it describes the tools with is not installed (the CrewAI venv, which holds crewai's mcp<2)."""
    try:
        return json.dumps(manifest.build(default_registry()), ensure_ascii=False).encode("utf-8")
    except ImportError:
        return None


@pytest.fixture(scope="session")
def query_model(tmp_path_factory: pytest.TempPathFactory) -> Path | None:
    """A folder holding the 8-bit query model (m3/embed/minilm_queries.py), derived once per test process; None
    where it cannot be derived (its converter missing: queries then embed exactly)."""
    from m3.embed import minilm, minilm_queries

    folder = tmp_path_factory.mktemp("query-model")
    try:
        minilm_queries.derived_model(minilm.model_file(), folder)
    except ImportError:
        return None
    return folder


def fresh_files(request: pytest.FixtureRequest) -> bool:
    """Whether the test watches m3 create its own files (marker ``fresh_files``): then nothing is prepared."""
    return request.node.get_closest_marker("fresh_files") is not None


@pytest.fixture
def m3_home(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh M3_HOME; every other M3_* variable is cleared so the host cannot leak in.

    Its run directory holds the tool manifest already, as after any earlier command: without it every test's
    first command would build it from the registry (seconds of CPU, a thousand times over a run). For the
    same reason it holds the 8-bit query model, as after any earlier search (a hard link to the one file the
    test process derived: every engine a test starts would otherwise derive it again, about 3 s of CPU each).
    """
    for name in list(os.environ):
        if name.startswith("M3_") and name not in KEPT_ENV:
            monkeypatch.delenv(name)
    home = tmp_path / "m3home"
    monkeypatch.setenv("M3_HOME", str(home))
    prepared = None if fresh_files(request) else request.getfixturevalue("tool_manifest")
    if prepared is not None:
        (home / "run").mkdir(mode=0o700, parents=True)
        os.chmod(home, 0o700)
        _write_private(home / "run" / f"tools-{__version__}.json", prepared)
        _link_query_model(home, request.getfixturevalue("query_model"))
    yield home
    stop_engines(home / "run")  # the engines front-ends started on this home (CLI calls start one per store)


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[TestCluster]:
    """The session's embedded PostgreSQL (only started when a PostgreSQL test runs)."""
    cluster = TestCluster()
    yield cluster
    cluster.close()


@pytest.fixture(params=STORES)
def store_kind(request: pytest.FixtureRequest) -> str:
    """Which store this test runs on; skips a test marked ``store_only`` for another store."""
    marker = request.node.get_closest_marker("store_only")
    if marker is not None and marker.args[0] != request.param:
        pytest.skip(f"{STORE_NAMES[marker.args[0]]} only: {marker.kwargs['reason']}")
    return str(request.param)


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite store migrated once per test process; a migrated ``store_url`` is a copy of it.

    Migrating a new file costs ~0.1-0.3 s, paid by a thousand tests; the copy, a few milliseconds. Like the
    PostgreSQL template database, it is checkpointed and closed before it is copied (no WAL beside it).
    """
    path = tmp_path_factory.mktemp("sqlite-template") / "m3.db"
    migrate_store(StoreOptions(url=f"sqlite:///{path}"))
    return path


def _link_query_model(home: Path, folder: Path | None) -> None:
    if folder is None:
        return
    kept = home / "models" / "minilm-queries"
    kept.mkdir(mode=0o700, parents=True)
    os.chmod(home / "models", 0o700)
    for path in folder.iterdir():
        os.link(path, kept / path.name)  # m3 replaces the file (a new inode), never writes into it


def _write_private(target: Path, data: bytes) -> None:
    """Write a new file ``target`` created owner-only (0600), as m3 creates its own files."""
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)


def _new_store(request: pytest.FixtureRequest, kind: str, tmp_path: Path, *, migrated: bool) -> Iterator[str]:
    if kind == "sqlite":
        path = tmp_path / "m3.db"
        if migrated and not fresh_files(request):
            _write_private(path, request.getfixturevalue("sqlite_template").read_bytes())
        yield f"sqlite:///{path}"
        return
    cluster: TestCluster = request.getfixturevalue("pg_cluster")
    url = cluster.new_database(migrated=migrated)
    yield url
    cluster.drop(url)


@pytest.fixture
def store_url(request: pytest.FixtureRequest, store_kind: str, tmp_path: Path) -> Iterator[str]:
    """The store under test: a new SQLite file, or a new PostgreSQL database (already migrated)."""
    yield from _new_store(request, store_kind, tmp_path, migrated=True)


@pytest.fixture(scope="module", params=STORES)
def module_store_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A migrated store shared by one module's tests (read-mostly fixtures such as an indexed corpus)."""
    yield from _new_store(request, str(request.param), tmp_path_factory.mktemp("store"), migrated=True)


@pytest.fixture
def empty_store_url(request: pytest.FixtureRequest, store_kind: str, tmp_path: Path) -> Iterator[str]:
    """A store nothing was ever done to (for migration tests): a new SQLite file, an empty PostgreSQL database."""
    yield from _new_store(request, store_kind, tmp_path, migrated=False)


# -- which store each test ran on ---------------------------------------------------------------------

_OUTCOMES: dict[str, dict[str, set[str]]] = {}


def store_of(nodeid: str) -> str | None:
    """The store a test ran on, from its parameter id (``test_x[postgres]``, ``test_y[sqlite-3]``).

    Read from the id rather than from collected items so that the count also works under pytest-xdist,
    whose controller sees only the workers' reports.
    """
    if not nodeid.endswith("]") or "[" not in nodeid:
        return None
    parts = nodeid[nodeid.index("[") + 1:-1].split("-")
    found = [p for p in parts if p in STORE_NAMES]
    return found[0] if len(found) == 1 else None


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    store = store_of(report.nodeid)
    if store is None or not (report.when == "call" or report.outcome != "passed"):
        return
    outcome = "skipped" if report.skipped else "failed" if report.failed else "passed"
    by_outcome = _OUTCOMES.setdefault(store, {"passed": set(), "failed": set(), "skipped": set()})
    if outcome != "passed":
        by_outcome["passed"].discard(report.nodeid)
    by_outcome[outcome].add(report.nodeid)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _OUTCOMES:
        return
    terminalreporter.write_sep("=", "store tests by store")
    for store in STORES:
        got = _OUTCOMES.get(store, {"passed": set(), "failed": set(), "skipped": set()})
        name = STORE_NAMES.get(store, store)
        terminalreporter.write_line(f"store tests run on {name}: {len(got['passed'])} passed, "
                                    f"{len(got['failed'])} failed, {len(got['skipped'])} skipped")


@pytest.fixture
def env(m3_home: Path, store_url: str) -> Iterator[dict[str, str]]:
    """Environment for m3 subprocesses and load_config: the temp home and the store under test.

    Engines started on it are stopped at the end, before the store is dropped.
    """
    values = {k: v for k, v in os.environ.items() if not k.startswith("M3_") or k in KEPT_ENV}
    values.update({"M3_HOME": str(m3_home), "M3_STORE_URL": store_url})
    yield values
    stop_engines(m3_home / "run")


@pytest.fixture
def config(env: dict[str, str]) -> Config:
    return load_config(env)


@pytest.fixture
def system(config: Config, embedder: MiniLMEmbedder) -> Iterator[ActorSystem]:
    started = ActorSystem(config, embedder).start()
    yield started
    # Without the drain: vectors still owed are derived data that the next start computes (the drain on stop
    # has tests of its own); a test that wrote in bulk must not wait for its backlog at teardown.
    started.stop(drain_embeddings=False)


@pytest.fixture
def service(config: Config, system: ActorSystem) -> Service:
    return Service(config, system, default_registry())
