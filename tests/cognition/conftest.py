"""Fixtures for the passes: the actor tests' migrated store and Writer (a pass writes only through a Writer)."""

from tests.actors.conftest import start_writer, store_options  # noqa: F401 - fixtures used by this package's tests
