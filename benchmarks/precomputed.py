"""An embedder that only looks vectors up: the cache's, or a fixed pseudo-random one.

Used to fill large stores quickly (perf_search): the Embedder actor runs its
real path (batches, ``StoreVectors`` to the Writer), but a text missing from
the cache gets a unit vector seeded by its hash instead of a model run.
Brute-force search cost does not depend on vector values; how many vectors
were synthetic is reported.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from benchmarks.cache import CachingEmbedder, text_key


class PrecomputedEmbedder:
    def __init__(self, cache: CachingEmbedder):
        self._cache = cache
        self._lock = threading.Lock()
        self.cached = 0
        self.synthetic = 0

    @property
    def model_id(self) -> str:
        return self._cache.model_id

    @property
    def dim(self) -> int:
        return self._cache.dim

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        matrix, found = self._cache.peek(texts)
        for i in np.flatnonzero(~found):
            matrix[i] = synthetic_vector(texts[int(i)], self.dim)
        with self._lock:
            self.cached += int(found.sum())
            self.synthetic += int((~found).sum())
        return matrix


def synthetic_vector(text: str, dim: int) -> npt.NDArray[np.float32]:
    """A unit vector determined by ``text``'s sha256."""
    rng = np.random.default_rng(int.from_bytes(text_key(text)[:8], "little"))
    vec = rng.standard_normal(dim).astype(np.float32)
    unit: npt.NDArray[np.float32] = vec / np.linalg.norm(vec)
    return unit
