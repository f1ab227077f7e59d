"""Text embedding backends: the :class:`Embedder` contract and the offline MiniLM default."""

from m3.embed.base import Embedder, length_batches
from m3.embed.minilm import MiniLMEmbedder

__all__ = ["Embedder", "MiniLMEmbedder", "length_batches"]
