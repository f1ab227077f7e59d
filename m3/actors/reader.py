"""Actors that read the store through one connection of their own.

The Searcher, the Directory and the TaskManager each own a read connection:
opened when the actor starts, closed when it stops, and every request is
answered inside one read transaction (one consistent snapshot, released
right after).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection

from m3.actors.base import M3Actor
from m3.protocols.base import Message
from m3.store.engine import OwnedConnection, StoreOptions


class StoreReader(M3Actor):
    def __init__(self, options: StoreOptions, **base: Any):
        super().__init__(**base)
        self._options = options
        self._owned = OwnedConnection(options, "reader")

    def setup(self) -> None:
        self._owned.open()

    def release(self) -> None:
        self._owned.close()

    def handle(self, message: Message) -> Any:
        with self.conn.begin():
            return super().handle(message)

    @property
    def conn(self) -> Connection:
        return self._owned.conn
