"""A backend that asks any OpenAI-compatible ``/v1/embeddings`` endpoint (``m3 embedder serve``, Ollama, …).

The request is the OpenAI one with ``encoding_format: "float"``, the most
widely supported form; the answer's rows are put back in input order by their
``index``, checked (count, width, finite numbers) and L2-normalised, since not
every server normalises. The vectors are stored under the model name sent to
the server: two endpoints serving the same name are assumed to serve the same
model.
"""

from __future__ import annotations

import copy
import os
import socket
import threading
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

import httpx2 as httpx
import numpy as np
import numpy.typing as npt

from m3.embed.base import check_texts, unit_rows
from m3.errors import ConfigError, EmbedderUnavailable

#: Names the calling process to an ``m3 embedder serve`` (its per-client counters).
CLIENT_HEADER = "X-M3-Client"
#: ``interactive`` (a query someone waits for) or ``background`` (batches); ``m3 embedder serve`` serves the
#: first kind ahead of the second.
PRIORITY_HEADER = "X-M3-Priority"
PRIORITIES = ("interactive", "background")


def base_url(url: str) -> str:
    """The API base of ``url``: ``http://h:p`` gets ``/v1``; a trailing ``/embeddings`` or ``/`` is dropped.

    Raises:
        ConfigError: ``url`` is not an http(s) URL with a host.
    """
    parts = urlsplit(url.strip())
    if parts.scheme not in {"http", "https"} or not parts.netloc:
        raise ConfigError(f"embed.url {url!r} is not an http(s) URL",
                          hint="Give the endpoint's base URL, e.g. http://127.0.0.1:8082/v1.")
    path = parts.path.rstrip("/").removesuffix("/embeddings") or "/v1"
    return f"{parts.scheme}://{parts.netloc}{path}"


def default_client_id() -> str:
    """``host:pid``: what an ``m3 embedder serve`` counts this process's requests under."""
    return f"{socket.gethostname()}:{os.getpid()}"


class HttpEmbedder:
    """An :class:`~m3.embed.base.Embedder` backed by an OpenAI-compatible HTTP endpoint.

    Args:
        url: The endpoint (see :func:`base_url`).
        model: The model name sent with every request and stored with every vector.
        key: Bearer key, sent as ``Authorization`` when given; never logged or put in an error.
        timeout_s: Longest wait for one answer (connecting is bounded by a third of it, at most 3 s,
            so a server that is gone is noticed at once).
        client_id: Sent as ``X-M3-Client``; default ``host:pid``.
        priority: Sent as ``X-M3-Priority`` (``interactive`` or ``background``) when given.
        max_batch: Most texts per request; longer inputs are split (64 is far below every server's limit:
            OpenAI accepts 2048).

    Thread safety: one instance may be used from any number of threads (the connection pool is
    shared); :meth:`with_priority` gives a sibling sharing the pool. The dimension is learnt from the
    first answer (asking :attr:`dim` first embeds one short text).
    """

    def __init__(self, url: str, model: str, *, key: str = "", timeout_s: float = 30.0,
                 client_id: str | None = None, priority: str | None = None, max_batch: int = 64) -> None:
        if not model:
            raise ConfigError("the http embedding backend needs a model name",
                              hint="Set embed.model to the name the endpoint serves (see its /v1/models).")
        self._priority = _checked(priority)
        self._base = base_url(url)
        self._model = model
        self._dim: int | None = None
        self._max_batch = max(1, max_batch)
        headers = {CLIENT_HEADER: client_id or default_client_id()}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        timeout = httpx.Timeout(timeout_s, connect=min(3.0, timeout_s / 3))
        self._client = httpx.Client(headers=headers, timeout=timeout)
        self._lock = threading.Lock()

    @property
    def model_id(self) -> str:
        """The model name sent to the endpoint."""
        return self._model

    @property
    def url(self) -> str:
        """The API base, e.g. ``http://127.0.0.1:8082/v1``."""
        return self._base

    @property
    def dim(self) -> int:
        """The vector width; the first call may ask the endpoint (raises :class:`EmbedderUnavailable`)."""
        if self._dim is None:
            self.embed(["dimension probe"])
        assert self._dim is not None
        return self._dim

    @property
    def loaded(self) -> bool:
        """True once the endpoint has answered (the model lives in the server)."""
        return self._dim is not None

    def with_priority(self, priority: str) -> HttpEmbedder:
        """A sibling that sends ``priority``, sharing this one's connections and learnt dimension."""
        sibling = copy.copy(self)
        sibling._priority = _checked(priority)
        return sibling

    def close(self) -> None:
        """Close the connection pool (shared with siblings)."""
        self._client.close()

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Embed ``texts`` through the endpoint; see :meth:`m3.embed.base.Embedder.embed`.

        Raises:
            EmbedderUnavailable: the endpoint cannot be reached, refuses the request (with its own
                message), or answers something that is not ``len(texts)`` finite vectors of one width.
        """
        check_texts(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        parts = [self._post(list(texts[i : i + self._max_batch])) for i in range(0, len(texts), self._max_batch)]
        return unit_rows(np.vstack(parts))

    # ---------------------------------------------------------------- internals

    def _post(self, texts: list[str]) -> npt.NDArray[np.float32]:
        headers = {PRIORITY_HEADER: self._priority} if self._priority else {}
        body = {"model": self._model, "input": texts, "encoding_format": "float"}
        try:
            response = self._client.post(f"{self._base}/embeddings", json=body, headers=headers)
        except httpx.HTTPError as exc:
            raise EmbedderUnavailable(
                f"the embedding endpoint {self._base} is unreachable: {type(exc).__name__}: {exc}",
                hint="Start it (`m3 embedder serve` for the shared m3 server) or check embed.url.",
                details={"url": self._base},
            ) from None
        if response.status_code != 200:
            raise _refusal(self._base, self._model, response)
        try:
            payload = response.json()
        except ValueError:
            raise self._bad_answer("the answer is not JSON") from None
        return self._matrix(payload, len(texts))

    def _matrix(self, payload: Any, n: int) -> npt.NDArray[np.float32]:
        data = payload.get("data") if isinstance(payload, dict) else None
        if not isinstance(data, list) or len(data) != n:
            raise self._bad_answer(f"expected {n} embeddings, got {len(data) if isinstance(data, list) else 'none'}")
        try:
            rows = sorted(data, key=lambda item: int(item.get("index", 0)))
            matrix = np.asarray([item["embedding"] for item in rows], dtype=np.float32)
        except (TypeError, ValueError, KeyError, AttributeError):
            raise self._bad_answer("the embeddings are not lists of numbers (encoding_format float)") from None
        if matrix.ndim != 2 or matrix.shape[1] == 0 or not np.isfinite(matrix).all():
            raise self._bad_answer(f"the embeddings have shape {matrix.shape} or non-finite values")
        with self._lock:
            if self._dim is None:
                self._dim = int(matrix.shape[1])
        if matrix.shape[1] != self._dim:
            raise self._bad_answer(f"vectors of {matrix.shape[1]} dims, expected {self._dim}")
        return matrix

    def _bad_answer(self, what: str) -> EmbedderUnavailable:
        return EmbedderUnavailable(f"the embedding endpoint {self._base} gave an unusable answer: {what}",
                                   hint="Check that embed.url is an OpenAI-compatible embeddings endpoint.",
                                   details={"url": self._base})


def _checked(priority: str | None) -> str | None:
    if priority is not None and priority not in PRIORITIES:
        raise ValueError(f"priority must be one of {PRIORITIES}, got {priority!r}")
    return priority


def error_message(response: httpx.Response) -> str:
    """The message of an OpenAI-compatible error answer (``{"error": {"message": …}}``), else the body's start;
    shared with the chat client (m3.cognition.llm)."""
    try:
        return str(response.json()["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return response.text[:300]


def _refusal(base: str, model: str, response: httpx.Response) -> EmbedderUnavailable:
    """The error for a non-200 answer, with the server's own message (OpenAI error shape) when it gave one."""
    message = error_message(response)
    status = response.status_code
    if status in {401, 403}:
        hint = "Set embed.key to the endpoint's key (`m3 config set embed.key …`)."
    elif status == 404:
        hint = f"The endpoint does not serve {model!r}; set embed.model to a model it lists at /v1/models."
    else:
        hint = "Check the endpoint's log; m3 retries later."
    return EmbedderUnavailable(f"the embedding endpoint {base} answered {status}: {message}", hint=hint,
                               details={"url": base, "status": status})
