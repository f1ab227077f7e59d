"""Fixtures for store tests: a migrated SQLite store opened the way the actors open it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Engine

from m3.store.engine import StoreOptions, migrate, open_engine


@pytest.fixture
def store_options(store_url: str) -> StoreOptions:
    return StoreOptions(url=store_url)


@pytest.fixture
def writer_engine(store_options: StoreOptions) -> Iterator[Engine]:
    """A writer engine on a freshly migrated store."""
    engine = open_engine(store_options, "writer")
    migrate(engine)
    yield engine
    engine.dispose()
