"""Actors that read the store through one connection of their own.

The Searcher, the Directory and the TaskManager each own a read connection:
opened when the actor starts, closed when it stops, and every request is
answered inside one read transaction (one consistent snapshot, released
right after).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Engine

from m3.actors.base import M3Actor
from m3.protocols.base import Message
from m3.store.engine import StoreOptions, open_engine


class StoreReader(M3Actor):
    def __init__(self, options: StoreOptions, **base: Any):
        super().__init__(**base)
        self._options = options
        self._engine: Engine | None = None
        self._conn: Connection | None = None

    def setup(self) -> None:
        self._engine = open_engine(self._options, "reader")
        self._conn = self._engine.connect()

    def release(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None

    def handle(self, message: Message) -> Any:
        with self.conn.begin():
            return super().handle(message)

    @property
    def conn(self) -> Connection:
        assert self._conn is not None, "the actor is not running"
        return self._conn
