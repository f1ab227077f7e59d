"""Retrieval tests drive a Writer of their own too: the actor tests' fixtures, shared."""

from tests.actors.conftest import start_writer, store_options

__all__ = ["start_writer", "store_options"]
