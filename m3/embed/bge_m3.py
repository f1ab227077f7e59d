"""BGE-M3 (1024 dims, dense vectors only) in process, from a local folder.

:class:`LocalBgeM3` is what both loaders share; :class:`BgeM3Embedder` runs the
model through ``bge-m3-lite`` (onnxruntime, no torch), and
:class:`~m3.embed.flag.FlagEmbeddingEmbedder` through FlagEmbedding (torch).

Loading never downloads (``m3 embedder fetch-model`` does, when asked; see
docs/embedder.md for the folder and the two model ids). The folder is checked
file by file against what bge-m3-lite pins (``bge_m3_lite.hub``, so the check
and the library agree); anything missing or wrong is reported by name and left
untouched (bge-m3-lite would delete a wrong file and try to download it), and
bge-m3-lite runs with ``BGE_M3_LITE_OFFLINE=1`` so that it cannot reach the
network either.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from m3.embed.base import check_texts, file_sha256, unit_rows
from m3.errors import EmbedderUnavailable

DIM = 1024
MODELS = ("bge-m3", "bge-m3-int8")
#: Texts per forward pass.
MAX_BATCH = 12
#: Truncation in tokens: BGE-M3 accepts 8192; 512 keeps CPU cost bounded, as FlagEmbedding's default does.
MAX_TOKENS = 512
#: Files smaller than this are compared by SHA-256, larger ones by size (as bge-m3-lite does on load).
HASH_LIMIT = 64 << 20
INSTALL_HINT = 'Install bge-m3-lite: pip install "bge-m3-lite>=0.6.2,<0.7" (a dependency of m3-memory).'


class LocalBgeM3:
    """BGE-M3 loaded from ``folder`` on first use; subclasses say how (:meth:`_load`).

    Construction touches no file. The model is loaded once, under a lock, on
    the first :meth:`embed` or :meth:`load`. Thread safety: one instance may be
    used from any number of threads; model calls are serialised under the same
    lock (one call already uses every core, and neither backend documents its
    model as thread-safe).
    """

    def __init__(self, folder: Path, model_id: str) -> None:
        self._folder = Path(folder).expanduser()
        self._model_id = model_id
        self._model: Any = None
        self._lock = threading.Lock()

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def dim(self) -> int:
        return DIM

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
            out = self._model.encode(list(texts), batch_size=MAX_BATCH, max_length=MAX_TOKENS,
                                     return_dense=True, return_sparse=False, return_colbert_vecs=False)
        return unit_rows(np.asarray(out["dense_vecs"], dtype=np.float32))

    def _load(self) -> Any:
        """Check the folder and build the model; called once, under the lock."""
        raise NotImplementedError


@dataclass(frozen=True)
class FileProblem:
    """A model file that is not ready: ``reason`` is ``missing``, ``size`` or ``sha256``."""

    name: str
    reason: str


def required_files(model_id: str) -> tuple[Any, ...]:
    """bge-m3-lite's ``RemoteFile`` entries that ``model_id`` loads (tokenizer, heads, backbone).

    Raises:
        EmbedderUnavailable: bge-m3-lite is not installed.
        ValueError: ``model_id`` is not one of :data:`MODELS`.
    """
    try:
        from bge_m3_lite import hub
    except ImportError as exc:
        raise EmbedderUnavailable("the 'bge-m3-lite' package is not installed", hint=INSTALL_HINT) from exc
    common = hub.TOKENIZER_FILES + hub.HEAD_FILES
    if model_id == "bge-m3":
        return tuple(common + hub.MODEL_FILES + hub.FUSED_FILES)
    if model_id == "bge-m3-int8":
        return tuple(common + hub.INT8_FILES)
    raise ValueError(f"not a bge-m3 model id: {model_id!r} (expected one of {MODELS})")


def check_files(folder: Path, model_id: str) -> list[FileProblem]:
    """What keeps ``folder`` from loading ``model_id``: one entry per missing or wrong file, none if ready.

    Reads the folder only; never deletes, moves or downloads anything.
    """
    problems = []
    for remote in required_files(model_id):
        problem = _check_one(folder / remote.name, remote)
        if problem is not None:
            problems.append(FileProblem(remote.name, problem))
    return problems


def _check_one(path: Path, remote: Any) -> str | None:
    try:
        size = path.stat().st_size
    except OSError:
        return "missing"
    if not path.is_file():
        return "missing"
    if size != remote.size:
        return "size"
    if remote.sha256 and remote.size < HASH_LIMIT and file_sha256(path) != remote.sha256:
        return "sha256"
    return None


class BgeM3Embedder(LocalBgeM3):
    """BGE-M3 dense vectors from the model files in ``folder``, on onnxruntime.

    Args:
        model_id: ``bge-m3`` (the fused fp32 graph; FlagEmbedding's vectors) or ``bge-m3-int8`` (the
            quantised backbone, 4x smaller; dense cosine about 0.999 to fp32, stored under its own id).
        threads: onnxruntime intra-op threads (None: bge-m3-lite's choice).

    Raises:
        ValueError: ``model_id`` is not one of :data:`MODELS`.
    """

    def __init__(self, folder: Path, model_id: str = "bge-m3", *, threads: int | None = None) -> None:
        if model_id not in MODELS:
            raise ValueError(f"not a bge-m3 model id: {model_id!r} (expected one of {MODELS})")
        super().__init__(folder, model_id)
        self._threads = threads

    def _load(self) -> Any:
        problems = check_files(self._folder, self._model_id)
        if problems:
            raise EmbedderUnavailable(
                f"the {self._model_id} model files are not complete in {self._folder}: "
                + ", ".join(f"{p.name} ({p.reason})" for p in problems),
                hint=f"Run `m3 embedder fetch-model {self._model_id}` (needs internet), or copy the files into "
                     f"{self._folder}, or point embed.model_dir at a folder holding them.",
                details={"dir": str(self._folder), "files": [p.name for p in problems]},
            )
        # The check passed, so bge-m3-lite has nothing to fetch; offline mode makes sure it never tries.
        os.environ["BGE_M3_LITE_OFFLINE"] = "1"
        from bge_m3_lite import BGEM3Embedder

        precision = "int8" if self._model_id == "bge-m3-int8" else "fp32"
        try:
            return BGEM3Embedder(self._folder, num_threads=self._threads, quiet=True, precision=precision)
        except Exception as exc:  # onnxruntime and the pickle loader raise their own classes
            raise EmbedderUnavailable(f"bge-m3-lite could not load {self._model_id} from {self._folder}: {exc}",
                                      hint=f"Run `m3 embedder fetch-model {self._model_id}` to repair the files.",
                                      details={"dir": str(self._folder)}) from exc
