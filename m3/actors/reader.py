"""Actors that own one store connection: opened when the actor starts, closed when it stops.

The Writer holds the write connection; the Embedder a read connection it opens transactions on itself;
the Searcher, the Directory and the TaskManager (:class:`StoreReader`) answer every request inside one
read transaction (one consistent snapshot, released right after).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection

from m3.actors.base import M3Actor
from m3.protocols.base import Message
from m3.store.engine import OwnedConnection, Role, StoreOptions


class ConnectionOwner(M3Actor):
    role: Role = "reader"

    def __init__(self, options: StoreOptions, **base: Any):
        super().__init__(**base)
        self._owned = OwnedConnection(options, self.role)

    def setup(self) -> None:
        self._owned.open()

    def release(self) -> None:
        self._owned.close()

    @property
    def conn(self) -> Connection:
        return self._owned.conn


class StoreReader(ConnectionOwner):
    def handle(self, message: Message) -> Any:
        with self.conn.begin():
            return super().handle(message)
