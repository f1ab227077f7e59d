"""The Embedder actor: computes vectors in the background and hands them to the Writer.

Writes never wait for a model: the Writer tells this actor which memories
are new after it commits them. Texts accumulate while more messages wait in
the mailbox and are embedded in bounded batches. On start it also picks up
memories that have no vector of the active model (written by a process that
stopped before embedding them), so every memory gets a vector eventually.

Query embeddings do not pass through here: the Searcher calls the (thread
safe) model directly, so an interactive search never queues behind a
background batch.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import numpy as np
from sqlalchemy import Connection

from m3.actors.base import Envelope, M3Actor
from m3.actors.supervisor import ActorHandle
from m3.embed.base import Embedder
from m3.errors import EmbedderUnavailable
from m3.protocols.base import Message
from m3.protocols.messages import EmbedderInfo, Flush, MemoriesWritten, StoreVectors
from m3.store import vectors
from m3.store.engine import StoreOptions, open_engine

log = logging.getLogger(__name__)


class Backfill(Message):
    """Look for memories without a vector of the active model."""


class EmbedderActor(M3Actor):
    def __init__(self, options: StoreOptions, *, embedder: Embedder, writer: ActorHandle, max_batch: int,
                 backend_name: str, **base: Any):
        super().__init__(**base)
        self._options = options
        self._embedder = embedder
        self._writer = writer
        self._max_batch = max(1, max_batch)
        self._backend_name = backend_name
        self._queue: dict[str, str] = {}  # id -> text, insertion ordered
        self._backfill_seq = 0  # memories up to this seq were already looked at by backfill
        self._conn: Connection | None = None
        self.last_error: str | None = None

    def setup(self) -> None:
        self._engine = open_engine(self._options, "reader")
        self._conn = self._engine.connect()
        self.actor_ref.tell(Envelope(Backfill()))

    def release(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
            self._engine.dispose()

    def handlers(self) -> dict[type[Message], Callable[[Any], Any]]:
        return {MemoriesWritten: self._enqueue, Backfill: self._backfill, Flush: self._flush,
                EmbedderInfo: self._info}

    def receive(self, env: Envelope) -> None:
        super().receive(env)
        # Embed once the mailbox is drained (or a batch is full), so bursts share model calls.
        while self._queue and (self.inbox_empty() or len(self._queue) >= self._max_batch):
            self._embed_next_batch()

    def _enqueue(self, msg: MemoriesWritten) -> None:
        for memory_id, text in zip(msg.ids, msg.texts, strict=True):
            self._queue[memory_id] = text

    def _backfill(self, _msg: Backfill) -> None:
        if self._backfill_page():
            self.actor_ref.tell(Envelope(Backfill()))

    def _backfill_page(self) -> bool:
        """Queue the next page of memories lacking a vector; True when more may follow."""
        assert self._conn is not None
        limit = self._max_batch * 16
        with self._conn.begin():
            missing = vectors.missing(self._conn, self._embedder.model_id, self._backfill_seq, limit)
        for seq, memory_id, text in missing:
            self._queue.setdefault(memory_id, text)
            self._backfill_seq = seq
        if missing:
            log.debug("backfill queued %d memories without a vector", len(missing))
        return len(missing) == limit

    def _flush(self, _msg: Flush) -> bool:
        """Embed everything queued or still lacking a vector, then answer (shutdown, tests)."""
        while True:
            while self._queue:
                self._embed_next_batch()
            if not self._backfill_page() and not self._queue:
                return True

    def _info(self, _msg: EmbedderInfo) -> dict[str, Any]:
        return {"backend": self._backend_name, "model": self._embedder.model_id, "dim": self._embedder.dim,
                "queued": len(self._queue), "last_error": self.last_error}

    def _embed_next_batch(self) -> None:
        ids = list(self._queue)[: self._max_batch]
        texts = [self._queue.pop(i) for i in ids]
        try:
            matrix = self._embedder.embed(texts)
        except EmbedderUnavailable as exc:
            # Leave them for the next start's backfill rather than spin on a broken model.
            self.last_error = exc.message
            log.error("embedding failed, %d memories stay without vectors for now: %s", len(ids), exc.message)
            return
        self.last_error = None
        blob = np.ascontiguousarray(matrix, dtype="<f4").tobytes()
        self._writer.tell(StoreVectors(model=self._embedder.model_id, dim=int(matrix.shape[1]),
                                       ids=tuple(ids), vectors=blob))
