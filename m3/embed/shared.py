"""The shared embed server (``m3 embedder serve``) with the in-process model as fallback.

While the server does not answer, the same model runs in process, so no write
and no search waits for it to come back (docs/embedder.md, "Fallback"); it is
asked again after ``retry_s``, and each change of route is logged once. Both
routes produce the same model's vectors: the server is asked for the local
model's id and refuses any other (it answers 404 for a model it does not
serve), so vectors from either route are stored under one model id.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from m3.embed.base import Embedder
from m3.embed.http import HttpEmbedder
from m3.errors import EmbedderUnavailable

log = logging.getLogger(__name__)


@dataclass
class _Route:
    """Which way embeddings go; shared by the siblings of one embedder, guarded by ``lock``."""

    retry_s: float
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: monotonic time before which the server is not asked (0: ask it).
    down_until: float = 0.0
    #: Why the server was last left, while it is; None while it answers.
    last_error: str | None = None
    by_server: int = 0
    in_process: int = 0


class SharedServerEmbedder:
    """An :class:`~m3.embed.base.Embedder` that prefers a shared server and falls back to ``local``.

    Args:
        remote: The shared server, asked for ``local.model_id``.
        local: The same model in process (loaded only if the server fails).
        retry_s: How long to stay in process after the server failed.

    Raises:
        ValueError: ``remote`` asks for another model than ``local`` computes.
    """

    def __init__(self, remote: HttpEmbedder, local: Embedder, *, retry_s: float = 10.0,
                 _route: _Route | None = None) -> None:
        if remote.model_id != local.model_id:
            raise ValueError(f"the shared server is asked for {remote.model_id!r} but the fallback is "
                             f"{local.model_id!r}")
        self._remote = remote
        self._local = local
        self._route = _route or _Route(retry_s=max(0.0, retry_s))

    @property
    def model_id(self) -> str:
        return self._local.model_id

    @property
    def dim(self) -> int:
        return self._local.dim

    @property
    def loaded(self) -> bool:
        """True once either route has produced vectors or the local model is in memory."""
        return bool(getattr(self._local, "loaded", False)) or self._route.by_server > 0

    def close(self) -> None:
        """Close the connections to the server (shared with siblings)."""
        self._remote.close()

    def with_priority(self, priority: str) -> SharedServerEmbedder:
        """A sibling sending ``priority`` to the server, sharing the local model and the route state."""
        return SharedServerEmbedder(self._remote.with_priority(priority), self._local, _route=self._route)

    def route(self) -> dict[str, Any]:
        """``{url, state: "server" | "in_process", last_error, by_server, in_process}`` (texts per route)."""
        r = self._route
        with r.lock:
            down = r.last_error is not None
            return {"url": self._remote.url, "state": "in_process" if down else "server",
                    "last_error": r.last_error, "by_server": r.by_server, "in_process": r.in_process}

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Embed through the server if it answers, else in process; see :meth:`Embedder.embed`.

        Raises:
            InvalidArgument: as :meth:`Embedder.embed`.
            EmbedderUnavailable: the server failed and the local model cannot run either.
        """
        if texts and self._server_due():  # either route refuses bad input (InvalidArgument) before any work
            try:
                matrix = self._remote.embed(texts)
                if matrix.shape[1] != self._local.dim:
                    raise EmbedderUnavailable(f"the shared server returned {matrix.shape[1]}-dim vectors for "
                                              f"{self.model_id!r}, which has {self._local.dim}")
            except EmbedderUnavailable as exc:
                self._server_failed(exc.message)
            else:
                self._server_answered(len(texts))
                return matrix
        matrix = self._local.embed(texts)
        with self._route.lock:
            self._route.in_process += len(texts)
        return matrix

    def _server_due(self) -> bool:
        with self._route.lock:
            return time.monotonic() >= self._route.down_until

    def _server_failed(self, reason: str) -> None:
        r = self._route
        with r.lock:
            first = r.last_error is None
            r.last_error = reason
            r.down_until = time.monotonic() + r.retry_s
        if first:
            log.warning("shared embed server unavailable, embedding in process (asking it again every %.0f s): %s",
                        r.retry_s, reason)

    def _server_answered(self, n: int) -> None:
        r = self._route
        with r.lock:
            back = r.last_error is not None
            r.last_error = None
            r.by_server += n
        if back:
            log.warning("shared embed server %s answers again; embedding through it", self._remote.url)
