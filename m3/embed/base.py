"""The contract every embedding backend implements, and helpers they share.

A backend turns texts into unit-length float32 vectors of a fixed dimension.
Vectors are only comparable with vectors carrying the same ``model_id``; the
store records the id and the dimension next to every vector.
"""

from __future__ import annotations

import hashlib
import os
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from m3.errors import InvalidArgument


@runtime_checkable
class Embedder(Protocol):
    """A text embedding backend.

    Implementations must be safe to call from several threads at once.
    """

    @property
    def model_id(self) -> str:
        """Stable tag stored with every vector, e.g. ``"all-MiniLM-L6-v2-int8"``.

        Two vectors are comparable only when their model ids are equal.
        """
        ...

    @property
    def dim(self) -> int:
        """Length of every vector this backend returns."""
        ...

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Embed ``texts``, keeping their order.

        Returns a C-contiguous float32 array of shape ``(len(texts), dim)``
        whose rows are L2-normalised (or all zeros where a backend documents
        that it cannot embed a text). No row contains NaN. An empty input
        gives shape ``(0, dim)``.

        Raises:
            InvalidArgument: ``texts`` is a bare ``str`` or holds a non-string.
            EmbedderUnavailable: the backend cannot run (missing package,
                missing or corrupt model file, unreachable server).
        """
        ...


def length_batches(lengths: Sequence[int], max_batch: int, max_padded: int) -> Iterator[list[int]]:
    """Group the indices of ``lengths`` (one per text, in the unit the backend pads in: token counts) into
    batches of similar length, at most ``max_batch`` each.

    Padding a batch to its longest member wastes work on every shorter
    member, so indices are ordered by length (longest first, ties in input
    order). Every index appears in exactly one group; callers scatter
    results back by index. A group also stops growing before
    ``len(group) * longest length in group`` would exceed ``max_padded``,
    which bounds a backend's working memory; a text longer than this still
    gets a group (of one).

    Raises:
        InvalidArgument: ``max_batch`` or ``max_padded`` is below 1.
    """
    _check_positive("max_batch", max_batch)
    _check_positive("max_padded", max_padded)
    group: list[int] = []
    for index in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        if group and (len(group) >= max_batch or (len(group) + 1) * lengths[group[0]] > max_padded):
            yield group
            group = []
        group.append(index)
    if group:
        yield group


def _check_positive(name: str, value: int) -> None:
    if isinstance(value, bool) or value < 1:
        raise InvalidArgument(f"{name} must be a positive integer, got {value!r}")


def check_texts(texts: Sequence[str]) -> None:
    """Refuse what :meth:`Embedder.embed` does not accept.

    Raises:
        InvalidArgument: ``texts`` is a bare ``str`` (a ``Sequence[str]`` itself, whose characters would be
            embedded one by one) or holds a non-string.
    """
    if isinstance(texts, str):
        raise InvalidArgument("texts must be a sequence of strings, not a single string; wrap it in a list")
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise InvalidArgument(f"texts[{i}] is a {type(text).__name__}, not a str")


def unit_rows(matrix: npt.NDArray[np.floating]) -> npt.NDArray[np.float32]:
    """``matrix`` as C-contiguous float32 with L2-normalised rows; an all-zero row stays zero."""
    out = np.ascontiguousarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return np.ascontiguousarray(out / np.maximum(norms, np.float32(1e-12)), dtype=np.float32)


def file_sha256(path: Path) -> str:
    """The hex SHA-256 of a file's bytes, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def usable_cpus() -> int:
    """The CPUs this process may run on: the affinity mask where there is one (containers and taskset limit it)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


#: The largest nice value Linux accepts (the least urgent).
MAX_NICE = 19


def lower_thread_priority(by: int) -> int | None:
    """Make the calling OS thread ``by`` nice steps less urgent; its nice value afterwards, or None if unchanged.

    On Linux the nice value belongs to each thread (``setpriority`` on its native id), so only this thread
    yields the CPU to the rest of the process (the gateway, the Writer) and to other processes when the
    cores are busy; on an idle machine it runs as fast as before. Threads it creates afterwards inherit the
    value. The value is capped at :data:`MAX_NICE`; ``by <= 0``, another OS, or a refusal leave it as it is.
    An unprivileged process cannot make a thread more urgent again, so call this only from a thread whose
    work can always wait.
    """
    if by <= 0 or not sys.platform.startswith("linux"):
        return None
    tid = threading.get_native_id()
    try:
        now = os.getpriority(os.PRIO_PROCESS, tid)
        os.setpriority(os.PRIO_PROCESS, tid, min(MAX_NICE, now + by))
        return os.getpriority(os.PRIO_PROCESS, tid)
    except OSError:  # a sandbox may refuse; embedding still works, only at the usual priority
        return None
