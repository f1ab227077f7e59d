"""Fixtures for the cognitive loop's pass tests: a Writer alone (no Embedder), shared with the actor tests."""

from tests.actors.conftest import start_writer, store_options  # noqa: F401 -- fixtures, found by name
