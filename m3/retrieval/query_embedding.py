"""A search's query embedding, computed on a helper thread while the Searcher's own thread works.

The helper embeds the query, then waits for the Searcher to say its dense leg is refreshed (an event, never
a sleep) and asks the leg for its proposals (:meth:`m3.retrieval.dense.DenseLeg.propose`). The model, the
in-memory index and SQLite release the GIL, so the two threads run at once on two cores.
"""

from __future__ import annotations

import threading
from concurrent.futures import Executor

import numpy as np
import numpy.typing as npt

from m3.embed.base import Embedder
from m3.retrieval.dense import DenseLeg, Hits

Vector = npt.NDArray[np.float32]
#: A query's vector and the dense leg's proposals for it (None: the leg proposes nothing, or was not ready).
Embedded = tuple[Vector, Hits | None]
#: Longest the Searcher's thread waits for the helper to pick the query up (a hand-over of the GIL, normally
#: tens of microseconds; the helper may still be busy with an earlier query whose vector was left unread).
HANDOVER_WAIT_S = 0.01


class QueryEmbedding:
    """One query's vector and proposals, started on ``pool`` at construction."""

    def __init__(self, pool: Executor, embedder: Embedder, dense: DenseLeg, query: str, n: int,
                 include_archived: bool, *, wait_s: float):
        self._started, self._refreshed = threading.Event(), threading.Event()
        self._ready = False
        self._wait_s = wait_s
        self._future = pool.submit(self._run, embedder, dense, query, n, include_archived)
        # Hand the helper the GIL now: otherwise it starts only when this thread next releases it, which
        # measured 1-1.5 ms into a search.
        self._started.wait(HANDOVER_WAIT_S)

    def _run(self, embedder: Embedder, dense: DenseLeg, query: str, n: int, include_archived: bool) -> Embedded:
        self._started.set()
        vector = embedder.embed([query])[0]
        if not self._refreshed.wait(self._wait_s) or not self._ready:
            return vector, None
        # The leg is read only after the Searcher's thread has finished refreshing it, and it is not changed
        # again before the Searcher has this answer.
        return vector, dense.propose(vector, n, include_archived)

    def leg_refreshed(self, ready: bool) -> None:
        """The Searcher is done refreshing the leg; ``ready``: the leg has vectors to propose from."""
        self._ready = ready
        self._refreshed.set()

    def result(self, timeout: float) -> Embedded:
        """The vector and proposals; raises what the embedder raised, or ``TimeoutError`` after ``timeout`` s."""
        return self._future.result(timeout=timeout)
