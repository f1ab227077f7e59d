"""Shared fixtures: a temporary M3_HOME, the store under test, a started m3.

Every test runs under its own temporary home, never ``~/.m3``. The real
offline embedder is loaded once per session and shared (it is immutable
and thread-safe). ``store_url`` is the one place that chooses the store;
tests that take it (directly or through ``config``) run on each store.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from m3.actors.system import ActorSystem
from m3.config import Config, load_config
from m3.embed.minilm import MiniLMEmbedder
from m3.gateway.registry import default_registry
from m3.gateway.service import Service

STORES = ["sqlite"]


@pytest.fixture(scope="session")
def embedder() -> MiniLMEmbedder:
    model = MiniLMEmbedder()
    model.load()
    return model


@pytest.fixture
def m3_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh M3_HOME; every other M3_* variable is cleared so the host cannot leak in."""
    for name in list(os.environ):
        if name.startswith("M3_"):
            monkeypatch.delenv(name)
    home = tmp_path / "m3home"
    monkeypatch.setenv("M3_HOME", str(home))
    return home


@pytest.fixture(params=STORES)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'm3.db'}"


@pytest.fixture
def env(m3_home: Path, store_url: str) -> dict[str, str]:
    """Environment for m3 subprocesses and load_config: the temp home and the store under test."""
    values = {k: v for k, v in os.environ.items() if not k.startswith("M3_")}
    values.update({"M3_HOME": str(m3_home), "M3_STORE_URL": store_url})
    return values


@pytest.fixture
def config(env: dict[str, str]) -> Config:
    return load_config(env)


@pytest.fixture
def system(config: Config, embedder: MiniLMEmbedder) -> Iterator[ActorSystem]:
    started = ActorSystem(config, embedder).start()
    yield started
    started.stop()


@pytest.fixture
def service(config: Config, system: ActorSystem) -> Service:
    return Service(config, system, default_registry())
