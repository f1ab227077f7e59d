"""Choosing the embedding backend from the configuration."""

from __future__ import annotations

import os

from m3.config import Config
from m3.embed.base import Embedder
from m3.errors import ConfigError

BACKENDS = ("minilm",)


def default_threads() -> int:
    """One less than the CPUs this process may use, at least one."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    return max(1, cpus - 1)


def create_embedder(config: Config) -> Embedder:
    """The backend named by ``embed.backend``; it loads its model lazily, on first use."""
    backend = config["embed.backend"]
    if backend == "minilm":
        from m3.embed.minilm import MiniLMEmbedder

        return MiniLMEmbedder(threads=config["embed.threads"] or default_threads())
    raise ConfigError(f"unknown embedding backend {backend!r}", hint=f"Use one of {list(BACKENDS)}.")
