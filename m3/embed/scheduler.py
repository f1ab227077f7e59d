"""Running many callers' embedding requests on one model (``m3 embedder serve``): two priorities, one worker.

The worker always takes *interactive* work (a query someone waits for) first,
and several small interactive requests that wait together share one model call.
*Background* requests are cut into chunks of at most ``max_batch`` texts,
queued one after the other, so an interactive request never waits for more
than the chunk already running. Per-client counters show who uses the server.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from m3.embed.base import Embedder
from m3.embed.http import PRIORITIES

log = logging.getLogger(__name__)

Matrix = npt.NDArray[np.float32]
Done = Callable[[Matrix | None, BaseException | None], None]


@dataclass
class ClientStats:
    requests: int = 0
    texts: int = 0
    interactive: int = 0
    background: int = 0
    errors: int = 0
    last_seen: float = 0.0


@dataclass
class _Request:
    """One caller's texts; answered once every chunk is done (or at the first failure)."""

    texts: list[str]
    done: Done
    out: Matrix | None = None
    remaining: int = 0
    failed: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def finish_chunk(self, start: int, matrix: Matrix) -> None:
        with self.lock:
            if self.failed:
                return
            if self.out is None:
                self.out = np.empty((len(self.texts), matrix.shape[1]), dtype=np.float32)
            self.out[start : start + len(matrix)] = matrix
            self.remaining -= 1
            if self.remaining:
                return
        self.done(self.out, None)

    def fail(self, error: BaseException) -> None:
        with self.lock:
            if self.failed:
                return
            self.failed = True
        self.done(None, error)


@dataclass
class _Chunk:
    request: _Request
    start: int
    texts: list[str]


class Scheduler:
    """Queues embedding requests by priority and runs them on ``embedder`` in one worker thread.

    Args:
        embedder: The model (its own threads do the arithmetic; one call at a time keeps each fast).
        max_batch: Most texts per model call (background chunk size and interactive coalescing limit).

    Thread safety: :meth:`submit` and :meth:`statistics` may be called from any thread; ``done``
    callbacks run in the worker thread and must not block.
    """

    def __init__(self, embedder: Embedder, max_batch: int = 32) -> None:
        self._embedder = embedder
        self._max_batch = max(1, max_batch)
        self._queues: dict[str, deque[_Chunk]] = {p: deque() for p in PRIORITIES}
        self._cond = threading.Condition()
        self._stopping = False
        self._clients: dict[str, ClientStats] = {}
        self._calls = 0
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="m3-embed-worker", daemon=True)

    def start(self) -> Scheduler:
        self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop after the chunk in progress; queued requests are answered with an error."""
        with self._cond:
            self._stopping = True
            left = [chunk for q in self._queues.values() for chunk in q]
            for q in self._queues.values():
                q.clear()
            self._cond.notify_all()
        for chunk in left:
            chunk.request.fail(RuntimeError("the embed server is stopping"))
        self._thread.join(timeout)

    def submit(self, texts: Sequence[str], priority: str, client: str, done: Done) -> None:
        """Queue ``texts``; ``done(matrix, None)`` or ``done(None, error)`` is called once, from the worker."""
        if priority not in self._queues:
            raise ValueError(f"priority must be one of {PRIORITIES}")
        request = _Request(list(texts), done)
        step = self._max_batch
        chunks = [_Chunk(request, i, request.texts[i : i + step]) for i in range(0, len(request.texts), step)]
        request.remaining = len(chunks)
        with self._cond:
            stats = self._clients.setdefault(client, ClientStats())
            stats.requests += 1
            stats.texts += len(request.texts)
            setattr(stats, priority, getattr(stats, priority) + 1)
            stats.last_seen = time.time()
            stopping = self._stopping
            if not stopping:
                self._queues[priority].extend(chunks)
                self._cond.notify()
        if stopping:
            done(None, RuntimeError("the embed server is stopping"))
        elif not chunks:
            done(np.zeros((0, self._embedder.dim), dtype=np.float32), None)

    def count_error(self, client: str) -> None:
        """Count a request of ``client`` refused before it was queued (bad input, wrong model)."""
        with self._cond:
            self._clients.setdefault(client, ClientStats()).errors += 1

    def statistics(self) -> dict[str, Any]:
        with self._cond:
            return {
                "uptime_s": round(time.monotonic() - self._started, 3),
                "model_calls": self._calls,
                "queued": {p: sum(len(c.texts) for c in q) for p, q in self._queues.items()},
                "clients": {name: vars(s).copy() for name, s in sorted(self._clients.items())},
            }

    # ---------------------------------------------------------------- worker

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stopping and not any(self._queues.values()):
                    self._cond.wait()
                if self._stopping:
                    return
                batch = self._take()
            self._embed(batch)

    def _take(self) -> list[_Chunk]:
        """The next work: interactive chunks (several, up to max_batch texts together) before background."""
        interactive = self._queues["interactive"]
        if interactive:
            batch = [interactive.popleft()]
            size = len(batch[0].texts)
            while interactive and size + len(interactive[0].texts) <= self._max_batch:
                size += len(interactive[0].texts)
                batch.append(interactive.popleft())
            return batch
        return [self._queues["background"].popleft()]

    def _embed(self, batch: list[_Chunk]) -> None:
        texts = [text for chunk in batch for text in chunk.texts]
        try:
            matrix = self._embedder.embed(texts)
        except Exception as exc:  # every caller gets the error; the worker carries on
            log.error("embedding %d texts failed: %s", len(texts), exc)
            for chunk in batch:
                chunk.request.fail(exc)
            return
        with self._cond:
            self._calls += 1
        offset = 0
        for chunk in batch:
            chunk.request.finish_chunk(chunk.start, matrix[offset : offset + len(chunk.texts)])
            offset += len(chunk.texts)
