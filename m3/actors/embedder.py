"""The Embedder actor: computes vectors in the background and hands them to the Writer.

Writes never wait for a model: the Writer tells this actor which memories it committed. They are
embedded in bounded batches once the mailbox is drained; the backlog (memories lacking a vector of the
configured model) is worked through a page at a time between batches, so it never delays a new memory
by more than one. During a change of model, new memories also get a vector of the active model (search
keeps using it), and once every memory has one of the configured model the Writer is asked to make it
active. A memory whose content and title equal one with a vector gets a copy of that vector. Queries
do not pass through here: the Searcher calls the (thread-safe) model itself. docs/embedder.md.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import numpy.typing as npt

from m3.actors.base import EarliestTimer, Envelope
from m3.actors.reader import ConnectionOwner
from m3.actors.supervisor import ActorHandle
from m3.embed.base import Embedder, lower_thread_priority
from m3.errors import EmbedderUnavailable
from m3.protocols.base import Message
from m3.protocols.messages.conversations import ChatWritten, StoreChatVectors
from m3.protocols.messages.memory import (
    ActivateModel,
    Drain,
    EmbedderInfo,
    EmbedderState,
    Flush,
    MarkModelBuilding,
    MemoriesWritten,
    StoreVectors,
)
from m3.store import chat_vectors, embedding_models, vectors
from m3.store.engine import StoreOptions

log = logging.getLogger(__name__)

Resolver = Callable[[str], Embedder | None]


class Backfill(Message):
    """Queue the next page of memories without a vector of the configured model."""


class Settled(Message):
    """The settle window (``embed.settle_ms``/``embed.max_delay_ms``) may have ended: look again."""


class TakeBackground(Message):
    """From now on this process runs the store's backlog (it took the background lease of a shared store)."""


class EmbedderActor(ConnectionOwner):
    def __init__(self, options: StoreOptions, *, embedder: Embedder, writer: ActorHandle, max_batch: int,
                 backend_name: str, resolve: Resolver, ask_timeout: float, background: bool, nice: int = 0,
                 settle_ms: int = 0, max_delay_ms: int = 0, **base: Any):
        super().__init__(options, **base)
        self._embedder = embedder
        self._resolve = resolve
        self._writer = writer
        self._ask_timeout = ask_timeout
        # Long-running processes work through the store's backlog (memories lacking a vector, a change of
        # model); a one-shot command embeds only what it wrote itself, so it exits in time on a busy store.
        self._background = background
        self._max_batch = max(1, max_batch)
        self._backend_name = backend_name
        # id -> (text, run supersession), insertion ordered: new memories (always True), then the backlog.
        self._fresh: dict[str, tuple[str, bool]] = {}
        self._backlog: dict[str, tuple[str, bool]] = {}
        self._backfill_seq = 0  # memories up to this seq were already looked at by the backfill
        self._paging = True  # more backlog pages may follow
        self._backfill_queued = False  # a Backfill message waits in the mailbox
        self._active: str | None = None  # the model search uses, as last read from the store
        self._unsynced = False  # vectors were told to the Writer since it last confirmed a commit
        # Chat rows to embed (chatlog_search's semantic leg): new ones as the Writer tells them, then the
        # backlog a page at a time once the memories are done; memories always go first.
        self._chat: dict[str, None] = {}
        self._chat_seq = 0
        self._chat_paging = True
        self._nice_by = nice
        # Writes first: a batch starts only once no new memory arrived for settle_s, or once the oldest new
        # memory has waited max_delay_s (under a sustained load vectors still follow within that bound).
        self._settle_s = max(0, settle_ms) / 1000
        self._max_delay_s = max(0, max_delay_ms) / 1000
        self._last_arrival: float | None = None  # monotonic time of the last MemoriesWritten/ChatWritten
        self._oldest_fresh: float | None = None  # when the queue of new memories last went from empty to not
        self._settle_timer = EarliestTimer()
        #: This actor's thread's nice value once lowered (None: left as it was).
        self.nice: int | None = None
        self.last_error: str | None = None
        self.embedded = 0  # vectors of the configured model computed (or reused) by this actor
        self.reused = 0

    @property
    def model(self) -> str:
        return self._embedder.model_id

    def setup(self) -> None:
        super().setup()
        # The model runs in this thread (one onnxruntime thread by default), so during a burst of writes the
        # deferred embeddings take only the CPU that the gateway, the Writer and the callers leave.
        self.nice = lower_thread_priority(self._nice_by)
        self._queue_backfill()

    def handlers(self) -> dict[type[Message], Callable[[Any], Any]]:
        return {MemoriesWritten: self._enqueue, Backfill: self._backfill, Flush: self._flush,
                Drain: self._drain, EmbedderInfo: self._info, TakeBackground: self._take_background,
                ChatWritten: self._enqueue_chat, Settled: self._settled}

    def _take_background(self, _msg: TakeBackground) -> bool:
        if not self._background:
            self._background = True
            self._paging = True
            self._queue_backfill()
        return True

    def receive(self, env: Envelope) -> None:
        super().receive(env)
        # Embed once the mailbox is drained (or a batch of new memories is full), so bursts share model
        # calls; between batches, messages that arrived (new memories, questions) are handled first. While
        # writes keep arriving, wait for them to settle (bounded by max_delay_s): the cores go to the writes
        # someone waits for, and the model gets fuller batches. A full batch runs even with messages waiting
        # (a burst of writes must not starve embedding), but only one per message handled: a stop or a
        # question queued behind a large backlog is answered after one batch, not after the whole backlog.
        if self._may_embed() and self._fresh and len(self._fresh) >= self._max_batch:
            self._embed_next_batch()
        while self._may_embed() and self._pending() and self.inbox_empty():
            self._embed_next_batch()
        while self._may_embed() and self._chat_ready() and self.inbox_empty():
            self._embed_chat_batch()
        if not self._backlog and self._paging and not self._fresh:
            # The next page (or the switch of model once none is left) must follow even when other messages
            # (a status question) arrived meanwhile: it queues behind them.
            self._queue_backfill()

    def _changing_model(self) -> bool:
        """True while search uses another model than the configured one (the store is being re-embedded)."""
        return self._active is not None and self._active != self.model

    def _pending(self) -> bool:
        return bool(self._fresh or self._backlog)

    def _may_embed(self) -> bool:
        """Whether a batch may start now; if not, the settle timer is armed for when it may."""
        if self._last_arrival is None or self._settle_s <= 0:
            return True
        now = time.monotonic()
        due = self._last_arrival + self._settle_s
        if self._oldest_fresh is not None:
            due = min(due, self._oldest_fresh + self._max_delay_s)
        if now >= due:
            return True
        if self._pending() or self._chat:
            self._settle_timer.arm(due, due - now, lambda: self.tell_self(Settled()))
        return False

    def release(self) -> None:
        self._settle_timer.cancel()
        super().release()

    def _settled(self, _msg: Settled) -> None:
        self._settle_timer.cancel()  # note that it fired; receive() then embeds if the window is over

    def _arrived(self) -> None:
        self._last_arrival = time.monotonic()
        if self._oldest_fresh is None and self._fresh:
            self._oldest_fresh = self._last_arrival

    def _enqueue(self, msg: MemoriesWritten) -> None:
        for memory_id, text in zip(msg.ids, msg.texts, strict=True):
            self._fresh[memory_id] = (text, msg.supersede)
            self._backlog.pop(memory_id, None)
        self._arrived()

    # -- chat rows ------------------------------------------------------------------------------

    def _enqueue_chat(self, msg: ChatWritten) -> None:
        self._chat.update(dict.fromkeys(msg.ids))
        self._arrived()

    def _chat_ready(self) -> bool:
        """Whether chat rows wait and no memory does; loads the next backlog page when the queue is empty."""
        if self._pending() or self._paging:
            return False
        if not self._chat and self._chat_paging and self._background:
            self._load_chat_page()
        return bool(self._chat)

    def _load_chat_page(self) -> int:
        """Queue the next page of chat rows without a vector of the configured model; how many."""
        if self._unsynced:  # as for memories: vectors told to the Writer may not be committed yet
            self._writer.ask(Flush(), self._ask_timeout)
            self._unsynced = False
        with self.conn.begin():
            page = chat_vectors.missing(self.conn, self.model, self._chat_seq, self._max_batch * 16)
        for seq, chat_id, _text in page:
            self._chat[chat_id] = None
            self._chat_seq = seq
        self._chat_paging = bool(page)
        return len(page)

    def _embed_chat_batch(self) -> None:
        ids = list(self._chat)[: self._max_batch]
        for chat_id in ids:
            del self._chat[chat_id]
        with self.conn.begin():
            # Rows redacted, deleted or embedded since they were queued have nothing to embed.
            texts = chat_vectors.texts(self.conn, self.model, ids)
        if not texts:
            return
        try:
            matrix = np.asarray(self._embedder.embed(list(texts.values())), dtype="<f4")
        except EmbedderUnavailable as exc:
            self.last_error = exc.message
            self._chat.clear()
            self._chat_paging = False  # the next start's backlog embeds them
            log.error("embedding failed, %d chat messages stay without vectors for now: %s", len(texts), exc.message)
            return
        self._writer.tell(StoreChatVectors(model=self.model, dim=int(matrix.shape[1]), ids=tuple(texts),
                                           vectors=np.ascontiguousarray(matrix).tobytes()))
        self._unsynced = True

    def _flush_chat(self) -> None:
        """Embed every chat row queued or still lacking a vector (a pass over the whole log)."""
        self._chat_seq, self._chat_paging = 0, True
        while self._chat or (self.last_error is None and self._load_chat_page() > 0):
            while self._chat:
                self._embed_chat_batch()

    # -- backlog and change of model -----------------------------------------------------------

    def _queue_backfill(self) -> None:
        """Queue a :class:`Backfill` behind the messages waiting, unless one is queued already."""
        if not self._backfill_queued:
            self._backfill_queued = True
            self.tell_self(Backfill())

    def _backfill(self, _msg: Backfill) -> None:
        self._backfill_queued = False
        if self._active != self.model:
            self._sync_models()
        if not self._background:
            self._paging = False
            return
        if not self._backlog and self._paging and self._load_page() == 0:
            self._paging = False
            self._try_activate()

    def _sync_models(self) -> None:
        """Read the active model; choose the configured one on a fresh store; record a change of model."""
        with self.conn.begin():
            active = embedding_models.active(self.conn)
        dim = self._dim()
        if active is None and dim is not None:
            self._writer.ask(ActivateModel(model=self.model, dim=dim, require_complete=False), self._ask_timeout)
            active = self.model
        if active is not None and active not in (self.model, self._active) and dim is not None:
            self._writer.ask(MarkModelBuilding(model=self.model, dim=dim), self._ask_timeout)
            log.info("re-embedding the store for %s in the background; search uses %s until every memory has "
                     "a vector of %s", self.model, active, self.model)
        self._active = active

    def _load_page(self) -> int:
        """Queue the next page of memories lacking a vector of the configured model; how many."""
        limit = self._max_batch * 16
        if self._unsynced:
            # Vectors told to the Writer may not be committed yet; without this a fresh memory would
            # look vector-less here and be embedded twice.
            self._writer.ask(Flush(), self._ask_timeout)
            self._unsynced = False
        with self.conn.begin():
            page = vectors.missing(self.conn, self.model, self._backfill_seq, limit)
        for seq, memory_id, text, has_vector in page:
            if memory_id not in self._fresh:
                # A memory with a vector of another model went through supersession already.
                self._backlog.setdefault(memory_id, (text, not has_vector))
            self._backfill_seq = seq
        if page:
            log.debug("backfill queued %d memories without a vector of %s", len(page), self.model)
        return len(page)

    def _try_activate(self) -> bool:
        """After a complete pass: make the configured model active if it now covers every memory."""
        if self._active == self.model or self._active is None:
            return True
        dim = self._dim()
        if dim is None or not self._writer.ask(ActivateModel(model=self.model, dim=dim), self._ask_timeout):
            # Memories arrived meanwhile (from another process): another pass from the start finds them.
            self._backfill_seq = 0
            if self.last_error is None:
                self._paging = True
                self._queue_backfill()
            return False
        log.info("re-embedding for %s is complete; search uses it from now on", self.model)
        self._active = self.model
        return True

    def _flush(self, _msg: Flush) -> bool:
        """Embed everything queued or still lacking a vector (and switch models if complete), then answer."""
        self._sync_models()
        for _attempt in range(3):  # memories written meanwhile by other processes can refuse a switch
            self._paging = True
            while self._pending() or self._load_page() > 0:
                while self._pending():
                    self._embed_next_batch()
            self._paging = False
            if self._try_activate() or self.last_error is not None:
                break
        self._flush_chat()
        return True

    def _drain(self, _msg: Drain) -> bool:
        if self._changing_model() or not self._background:
            while self._fresh:
                self._embed_next_batch()
            while self._chat:
                self._embed_chat_batch()
            return True
        return self._flush(Flush())

    def _info(self, _msg: EmbedderInfo) -> EmbedderState:
        route = getattr(self._embedder, "route", None)
        return {"backend": self._backend_name, "model": self.model, "dim": self._dim(),
                "active_model": self._active or self.model,
                "reembedding": self._changing_model(),
                "queued": len(self._fresh) + len(self._backlog) + len(self._chat), "last_error": self.last_error,
                "embedded": self.embedded, "reused": self.reused, "server": route() if route else None,
                "nice": self.nice}

    # -- embedding -------------------------------------------------------------------------------

    def _embed_next_batch(self) -> None:
        fresh = bool(self._fresh)
        queue = self._fresh if fresh else self._backlog
        ids = list(queue)[: self._max_batch]
        queued = [queue.pop(i) for i in ids]
        if not self._fresh:
            self._oldest_fresh = None
        texts = [text for text, _ in queued]
        supersede = [flag for _, flag in queued]
        try:
            matrix = self._vectors(ids, texts)
        except EmbedderUnavailable as exc:
            # Leave them for the next start's backfill rather than spin on a broken model.
            self.last_error = exc.message
            self._paging = False
            log.error("embedding failed, %d memories stay without vectors for now: %s", len(ids), exc.message)
            return
        self.last_error = None
        self.embedded += len(ids)
        if fresh and self._changing_model() and self._embed_for_search(ids, texts):
            supersede = [False] * len(ids)  # supersession ran with the model search uses
        for flag in (True, False):
            chosen = [i for i, s in enumerate(supersede) if s is flag]
            if chosen:
                self._store(self.model, [ids[i] for i in chosen], matrix[chosen], flag)

    def _vectors(self, ids: list[str], texts: list[str]) -> npt.NDArray[np.float32]:
        """Vectors of the configured model: copies of stored ones for identical memories, the rest computed."""
        with self.conn.begin():
            known = vectors.reusable(self.conn, self.model, ids)
        todo = [text for memory_id, text in zip(ids, texts, strict=True) if memory_id not in known]
        computed: Iterator[npt.NDArray[np.float32]] = iter(self._embedder.embed(todo) if todo else [])
        self.reused += len(ids) - len(todo)
        return np.stack([known[memory_id] if memory_id in known else next(computed) for memory_id in ids]
                        ).astype(np.float32, copy=False)

    def _embed_for_search(self, ids: list[str], texts: list[str]) -> bool:
        """During a change of model, give new memories a vector of the model search still uses."""
        assert self._active is not None
        other = self._resolve(self._active)
        if other is None:
            return False
        try:
            matrix = other.embed(texts)
        except EmbedderUnavailable as exc:
            log.warning("new memories get no %s vector while re-embedding (search finds them by keyword): %s",
                        self._active, exc.message)
            return False
        self._store(self._active, ids, matrix, True)
        return True

    def _store(self, model: str, ids: list[str], matrix: npt.NDArray[np.float32], supersede: bool) -> None:
        blob = np.ascontiguousarray(matrix, dtype="<f4").tobytes()
        self._writer.tell(StoreVectors(model=model, dim=int(matrix.shape[1]), ids=tuple(ids), vectors=blob,
                                       supersede=supersede))
        self._unsynced = True

    # -- helpers ---------------------------------------------------------------------------------

    def _dim(self) -> int | None:
        """The configured model's dimension, or None while an HTTP backend cannot be asked."""
        try:
            return int(self._embedder.dim)
        except EmbedderUnavailable as exc:
            self.last_error = exc.message
            return None
