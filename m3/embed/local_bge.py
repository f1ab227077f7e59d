"""What the two in-process BGE-M3 embedders share: a local folder, lazy loading, serialised calls.

:class:`~m3.embed.bge_m3.BgeM3Embedder` (onnxruntime) and
:class:`~m3.embed.flag.FlagEmbeddingEmbedder` (torch) differ only in how they
check the folder and build the model; both models answer the same
``encode(texts, batch_size=, max_length=, return_dense=...)`` call.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from m3.embed.base import check_texts, unit_rows

__all__ = ["DIM", "LocalBgeM3"]

DIM = 1024


class LocalBgeM3:
    """A BGE-M3 model loaded from ``folder`` on first use; subclasses say how (:meth:`_load`).

    Construction touches no file. The model is loaded once, under a lock, on
    the first :meth:`embed` or :meth:`load`; later model calls are serialised
    under the same lock (one call already uses every core, and neither
    backend documents its model as thread-safe).

    Args:
        folder: Where the model files are.
        max_batch: Most texts per forward pass (at least 1).
        max_tokens: Truncation in tokens, clamped to 8..8192 (BGE-M3 accepts
            8192; 512 keeps CPU cost bounded).
    """

    def __init__(self, folder: Path, *, max_batch: int = 12, max_tokens: int = 512) -> None:
        self._folder = Path(folder).expanduser()
        self._max_batch = max(1, max_batch)
        self._max_tokens = max(8, min(max_tokens, 8192))
        self._model: Any = None
        self._lock = threading.Lock()

    @property
    def model_id(self) -> str:
        raise NotImplementedError

    @property
    def dim(self) -> int:
        return DIM

    @property
    def folder(self) -> Path:
        return self._folder

    @property
    def loaded(self) -> bool:
        return self._model is not None

    def load(self) -> None:
        """Check the folder and load the model now instead of on the first :meth:`embed`.

        Raises:
            EmbedderUnavailable: the folder is incomplete (every missing or wrong
                file named in ``details.files``), the backend is not installed, or
                loading fails.
        """
        with self._lock:
            if self._model is None:
                self._model = self._load()

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Dense BGE-M3 vectors; see :meth:`m3.embed.base.Embedder.embed`."""
        check_texts(texts)
        if not texts:
            return np.zeros((0, DIM), dtype=np.float32)
        self.load()
        with self._lock:
            out = self._model.encode(list(texts), batch_size=self._max_batch, max_length=self._max_tokens,
                                     return_dense=True, return_sparse=False, return_colbert_vecs=False)
        return unit_rows(np.asarray(out["dense_vecs"], dtype=np.float32))

    def _load(self) -> Any:
        """Check the folder and build the model; called once, under the lock."""
        raise NotImplementedError
