"""Choosing the embedding backend from the configuration (``embed.backend``, ``embed.model``).

With an in-process backend and ``embed.url`` set, the process embeds through
that shared server (``m3 embedder serve``) and falls back to the in-process
model when it does not answer. docs/embedder.md describes the backends.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from m3.config import Config
from m3.embed.base import Embedder, usable_cpus
from m3.errors import ConfigError

if TYPE_CHECKING:
    from m3.embed.http import HttpEmbedder

#: The model ids each backend computes (MiniLM: any truncation), its default first; http: whatever
#: the endpoint serves, named in ``embed.model``.
MODELS: dict[str, tuple[str, ...]] = {
    "minilm": ("all-MiniLM-L6-v2-int8", "all-MiniLM-L6-v2-int8@<2..512>"),
    "bge-m3": ("bge-m3", "bge-m3-int8"),
    "flagembedding": ("bge-m3",),
    "http": (),
}


def model_dir(config: Config, backend: str) -> Path:
    """The folder of a bge-m3 / flagembedding model's files (``embed.model_dir`` or its default)."""
    if config["embed.model_dir"]:
        return Path(config["embed.model_dir"]).expanduser()
    if backend == "bge-m3" and os.environ.get("BGE_M3_LITE_CACHE"):
        return Path(os.environ["BGE_M3_LITE_CACHE"]).expanduser()
    return config.home / "models" / backend


def configured_model(config: Config) -> str:
    """The model id vectors are stored under: ``embed.model``, or the backend's own model when empty."""
    backend = _backend(config)
    model: str = config["embed.model"]
    if model:
        return model
    if backend == "http":
        raise ConfigError("embed.backend is http but embed.model is empty",
                          hint="Set embed.model to the name the endpoint serves (see its /v1/models).")
    return MODELS[backend][0]


def create_local_embedder(config: Config) -> Embedder:
    """The configured in-process backend for the configured model; it loads lazily.

    Raises:
        ConfigError: the backend is unknown or http, or it cannot compute the model.
    """
    backend = _backend(config)
    if backend == "http":
        raise ConfigError("embed.backend http computes nothing in process",
                          hint="Set embed.backend to minilm, bge-m3 or flagembedding for an in-process model.")
    model = configured_model(config)
    built = local_embedder_for(config, model, backend)
    if built is None:
        raise ConfigError(f"embed.backend {backend} cannot compute the model {model!r}",
                          hint=f"Use one of {list(MODELS[backend])} with {backend}, or another embed.backend.")
    return built


def local_embedder_for(config: Config, model: str, backend: str | None = None) -> Embedder | None:
    """An in-process embedder computing ``model`` (with ``backend`` if given), or None if m3 has none."""
    from m3.embed import bge_m3, minilm

    threads = config["embed.threads"] or max(1, usable_cpus() - 1)  # a core left to the rest of m3
    max_tokens = minilm.max_tokens_of(model)
    if max_tokens is not None and backend in (None, "minilm"):
        return minilm.MiniLMEmbedder(threads=threads, max_tokens=max_tokens, max_batch=config["embed.max_batch"])
    if model in bge_m3.MODELS and backend in (None, "bge-m3"):
        return bge_m3.BgeM3Embedder(model_dir(config, "bge-m3"), model, threads=threads)
    if model == "bge-m3" and backend == "flagembedding":
        from m3.embed.flag import FlagEmbeddingEmbedder

        return FlagEmbeddingEmbedder(model_dir(config, "flagembedding"))
    return None


def create_embedder(config: Config) -> Embedder:
    """The embedder of the configured model: in process, through the shared server, or over HTTP.

    Nothing is loaded or contacted here; the first embedding does that.

    Raises:
        ConfigError: unknown backend, a model the backend cannot compute, or http without url or model.
    """
    backend = _backend(config)
    url: str = config["embed.url"]
    if backend == "http":
        if not url:
            raise ConfigError("embed.backend is http but embed.url is empty",
                              hint="Set embed.url, e.g. `m3 config set embed.url http://127.0.0.1:8082/v1`.")
        return _http(config, configured_model(config))
    local = create_local_embedder(config)
    if not url:
        return local
    from m3.embed.shared import SharedServerEmbedder

    return SharedServerEmbedder(_http(config, local.model_id), local, retry_s=config["embed.server_retry_s"])


def _http(config: Config, model: str) -> HttpEmbedder:
    from m3.embed.http import HttpEmbedder, default_client_id

    return HttpEmbedder(config["embed.url"], model, key=config["embed.key"], timeout_s=config["embed.timeout_s"],
                        client_id=f"{config['identity.agent_id']}@{default_client_id()}", priority="background")


class ModelResolver:
    """Gives an embedder for any model id (built once each), or None when m3 cannot compute it.

    Used while the store moves from one model to another: search keeps embedding queries with the
    previous model. ``configured`` answers for its own id; other ids get an in-process backend when m3
    has one, else the http endpoint at ``embed.url`` (if any), asked for that model by name.
    """

    def __init__(self, config: Config, configured: Embedder) -> None:
        self._config = config
        self._built: dict[str, Embedder | None] = {configured.model_id: configured}
        self._owned: list[Embedder] = []
        self._lock = threading.Lock()

    def __call__(self, model: str) -> Embedder | None:
        with self._lock:
            if model not in self._built:
                made = local_embedder_for(self._config, model)
                if made is None and self._config["embed.url"]:
                    made = _http(self._config, model)
                if made is not None:
                    self._owned.append(made)
                self._built[model] = made
            return self._built[model]

    def close(self) -> None:
        """Close the embedders this resolver built (connection pools); the configured one is the caller's."""
        with self._lock:
            for made in self._owned:
                close_embedder(made)
            self._owned.clear()


def close_embedder(embedder: Embedder) -> None:
    """Release what an embedder holds open (an HTTP connection pool), if it has anything to release."""
    close: Callable[[], None] | None = getattr(embedder, "close", None)
    if close is not None:
        close()


def _backend(config: Config) -> str:
    backend: str = config["embed.backend"]
    if backend not in MODELS:
        raise ConfigError(f"unknown embedding backend {backend!r}", hint=f"Use one of {list(MODELS)}.")
    return backend
