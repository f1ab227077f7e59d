"""Choosing the embedding backend from the configuration."""

from __future__ import annotations

from m3.config import Config
from m3.embed.base import Embedder
from m3.errors import ConfigError

BACKENDS = ("minilm",)


def create_embedder(config: Config) -> Embedder:
    """The backend named by ``embed.backend``; it loads its model lazily, on first use."""
    backend = config["embed.backend"]
    if backend == "minilm":
        from m3.embed.minilm import MiniLMEmbedder

        threads = config["embed.threads"] or None
        return MiniLMEmbedder(threads=threads)
    raise ConfigError(f"unknown embedding backend {backend!r}", hint=f"Use one of {list(BACKENDS)}.")
