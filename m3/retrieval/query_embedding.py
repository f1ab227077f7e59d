"""A search's query embedding, computed on a helper thread while the Searcher's own thread works.

The helper embeds the query, then waits for the Searcher to say its dense leg is refreshed and under which
filter to propose (an event, never a sleep) and asks the leg for its proposals
(:meth:`m3.retrieval.dense.DenseLeg.propose`). The model, the in-memory index and SQLite release the GIL, so
the two threads run at once on two cores. The helper starts before the Searcher works out the search's filter
and the times its query names: the embedding is the longer road, and it needs neither.
"""

from __future__ import annotations

import threading
from concurrent.futures import Executor
from typing import Any

import numpy as np
import numpy.typing as npt

from m3.embed.base import Embedder
from m3.retrieval.dense import DenseLeg, Hits

Vector = npt.NDArray[np.float32]
#: A query's vector and the dense leg's proposals for it (None: the leg proposes nothing, or was not ready).
Embedded = tuple[Vector, Hits | None]
#: Longest the Searcher's thread waits for the helper to start on a query (a busy pool: it goes on without).
HANDOVER_WAIT_S = 0.05


class QueryEmbedding:
    """One query's vector and proposals, started on ``pool`` at construction."""

    def __init__(self, pool: Executor, embedder: Embedder, dense: DenseLeg, query: str, n: int,
                 include_archived: bool, *, wait_s: float):
        self._refreshed = threading.Event()
        #: The time leg's hits when the leg ranked them on the helper thread (read after :meth:`result`).
        self.window_hits: Hits | None = None
        self._ready = False
        self._clause: Any = None
        self._window: tuple[Any, int] | None = None
        self._wait_s = wait_s
        self._started = threading.Event()
        self._future = pool.submit(self._run, embedder, dense, query, n, include_archived)
        # Hand the helper Python's lock now: it keeps it only to tokenize the query and lets go of it inside
        # the model. Otherwise it would wait for the lock until this thread next lets go of it (its first
        # statement, or the interpreter's switch interval), and the query would start embedding that much
        # later (docs/search.md).
        self._started.wait(HANDOVER_WAIT_S)

    def _run(self, embedder: Embedder, dense: DenseLeg, query: str, n: int, include_archived: bool) -> Embedded:
        self._started.set()
        vector = embedder.embed([query])[0]
        if not self._refreshed.wait(self._wait_s) or not self._ready:
            return vector, None
        # The leg is read only after the Searcher's thread has finished refreshing it, and it is not changed
        # again before the Searcher has this answer.
        proposed = dense.propose(vector, n, include_archived, self._clause)
        if self._window is not None:
            self.window_hits = dense.propose_narrow(vector, *self._window)
        return vector, proposed

    def leg_refreshed(self, ready: bool, clause: Any = None, window: tuple[Any, int] | None = None) -> None:
        """The Searcher is done refreshing the leg; ``ready``: the leg has vectors to propose from; ``clause``:
        the search's filter (a leg ranking in SQL proposes under it); ``window``: the time leg's clause and size,
        for a leg that can rank it apart (:attr:`window_hits`)."""
        self._ready, self._clause, self._window = ready, clause, window
        self._refreshed.set()

    def done(self) -> bool:
        """The vector and proposals are there (or the helper failed): :meth:`result` returns at once."""
        return self._future.done()

    def result(self, timeout: float) -> Embedded:
        """The vector and proposals; raises what the embedder raised, or ``TimeoutError`` after ``timeout`` s."""
        return self._future.result(timeout=timeout)
