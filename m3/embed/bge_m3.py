"""BGE-M3 (1024 dims) in process through ``bge-m3-lite`` (onnxruntime, no torch).

The weights are never downloaded here. They live in one folder (``embed.model_dir``,
by default ``<M3_HOME>/models/bge-m3``) that ``m3 embedder fetch-model bge-m3``
fills, or that a user fills by hand with the files bge-m3-lite pins (names,
sizes and SHA-256 come from ``bge_m3_lite.hub``, so the check below and the
library agree). Before loading, the folder is checked file by file; anything
missing or wrong is reported by name and left untouched (bge-m3-lite would
delete a wrong file and try to download it), and bge-m3-lite runs with
``BGE_M3_LITE_OFFLINE=1`` so that it cannot reach the network either.

Two model ids: ``bge-m3`` (the fused fp32 graph; the same vectors as
FlagEmbedding's ``BGEM3FlagModel``) and ``bge-m3-int8`` (the quantised
backbone, 4x smaller; dense cosine about 0.999 to fp32, stored under its own
id all the same). Only the dense vectors are used.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from m3.embed.base import file_sha256
from m3.embed.local_bge import DIM, LocalBgeM3
from m3.errors import EmbedderUnavailable

__all__ = ["DIM", "MODELS", "BgeM3Embedder", "FileProblem", "check_files", "required_files"]

MODELS = ("bge-m3", "bge-m3-int8")
#: Files smaller than this are compared by SHA-256, larger ones by size (as bge-m3-lite does on load).
HASH_LIMIT = 64 << 20
INSTALL_HINT = 'Install bge-m3-lite: pip install "bge-m3-lite>=0.6.2,<0.7" (a dependency of m3-memory).'


@dataclass(frozen=True)
class FileProblem:
    """A model file that is not ready: ``reason`` is ``missing``, ``size`` or ``sha256``."""

    name: str
    reason: str
    expected_size: int

    def describe(self) -> str:
        return f"{self.name} ({self.reason})"


def _hub() -> Any:
    try:
        from bge_m3_lite import hub
    except ImportError as exc:
        raise EmbedderUnavailable("the 'bge-m3-lite' package is not installed", hint=INSTALL_HINT) from exc
    return hub


def required_files(model_id: str) -> tuple[Any, ...]:
    """bge-m3-lite's ``RemoteFile`` entries that ``model_id`` loads (tokenizer, heads, backbone).

    Raises:
        EmbedderUnavailable: bge-m3-lite is not installed.
        ValueError: ``model_id`` is not one of :data:`MODELS`.
    """
    hub = _hub()
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
            problems.append(FileProblem(remote.name, problem, int(remote.size)))
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
    """BGE-M3 dense vectors from a local folder, on onnxruntime.

    Construction is cheap and touches no file; the folder is checked and the
    model loaded on the first :meth:`embed` (or :meth:`load`), once, under a lock.

    Args:
        folder: Where the model files are (see the module docstring).
        model_id: ``bge-m3`` or ``bge-m3-int8``.
        threads: onnxruntime intra-op threads (None: bge-m3-lite's choice).
        max_batch: Most texts per forward pass.
        max_tokens: Truncation (BGE-M3 accepts up to 8192; 512 keeps CPU cost bounded, as FlagEmbedding's
            default does).

    Thread safety: one instance may be used from any number of threads; model calls are serialised
    (bge-m3-lite's embedder is not documented as thread-safe, and one call already uses every thread).

    Raises:
        ValueError: ``model_id`` is not one of :data:`MODELS`.
    """

    def __init__(self, folder: Path, model_id: str = "bge-m3", *, threads: int | None = None,
                 max_batch: int = 12, max_tokens: int = 512) -> None:
        if model_id not in MODELS:
            raise ValueError(f"not a bge-m3 model id: {model_id!r} (expected one of {MODELS})")
        super().__init__(folder, max_batch=max_batch, max_tokens=max_tokens)
        self._model_id = model_id
        self._threads = threads

    @property
    def model_id(self) -> str:
        return self._model_id

    def __repr__(self) -> str:
        return f"BgeM3Embedder({str(self._folder)!r}, model_id={self._model_id!r})"

    def _load(self) -> Any:
        problems = check_files(self._folder, self._model_id)
        if problems:
            raise EmbedderUnavailable(
                f"the {self._model_id} model files are not complete in {self._folder}: "
                + ", ".join(p.describe() for p in problems),
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
