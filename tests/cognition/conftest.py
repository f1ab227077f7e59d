"""Fixtures for the loop passes: a Writer of our own on a migrated store (the actor tests' fixtures, shared)."""

from __future__ import annotations

from tests.actors.conftest import start_writer, store_options  # noqa: F401
