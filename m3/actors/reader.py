"""Actors that own one store connection: opened when the actor starts, closed when it stops.

The Writer holds the write connection; the Embedder a read connection it opens transactions on itself;
the Searcher, the Directory and the TaskManager (:class:`StoreReader`) answer every request inside one
read transaction (one consistent snapshot, released right after).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Engine

from m3.actors.base import M3Actor
from m3.protocols.base import Message
from m3.store.engine import Role, StoreOptions, open_engine


class ConnectionOwner(M3Actor):
    """The one engine and connection this actor owns; only the actor's thread touches them."""

    role: Role = "reader"

    def __init__(self, options: StoreOptions, **base: Any):
        super().__init__(**base)
        self._options = options
        self._engine: Engine | None = None
        self._conn: Connection | None = None

    def setup(self) -> None:
        self._engine = open_engine(self._options, self.role)
        self._conn = self._engine.connect()

    def release(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None

    @property
    def conn(self) -> Connection:
        """The open connection; fails loudly if the actor is not running."""
        assert self._conn is not None, "the actor is not running"
        return self._conn


class StoreReader(ConnectionOwner):
    def handle(self, message: Message) -> Any:
        with self.conn.begin():
            return super().handle(message)
