"""An embedding cache in front of any backend, keyed by model and content hash.

Embedding is by far the most expensive step of a write (and of re-embedding
a store after a model change), while the same texts recur: repeated
messages, re-imported conversations, benchmark reruns. :class:`CachingEmbedder`
wraps an :class:`~m3.embed.base.Embedder` and keeps every vector it has
computed in a SQLite file, keyed by ``(model_id, sha256(text))``:

* a text seen before is answered from the file, bit for bit the vector the
  backend returned the first time;
* the misses of one call are embedded together, in one backend call, each
  distinct text once;
* vectors of different models never mix: the model id is part of the key,
  and a stored vector whose length does not match the backend's dimension
  is treated as a miss and replaced.

The file is shared safely between threads (one connection behind a lock;
the backend runs outside it) and between processes (WAL journal, busy
timeout). A cache that cannot be read or written (full disk, corrupt file)
never fails an embedding: the cache is bypassed and a warning logged.
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from m3.embed.base import Embedder, check_texts
from m3.errors import EmbedderUnavailable

__all__ = ["CacheStats", "CachingEmbedder", "text_key"]

log = logging.getLogger(__name__)

#: Keys per SELECT; well below SQLite's bound-parameter limit.
LOOKUP_CHUNK = 500

# A rowid table, not WITHOUT ROWID: a WITHOUT ROWID table keeps its rows in an index
# b-tree, whose cells hold about 1 KB before spilling to an overflow page, so every
# 1.5 KB vector would cost a 4 KB page (measured: 4.7 KB per vector against 2.1 KB).
_SCHEMA = """
CREATE TABLE IF NOT EXISTS embedding_cache (
    model TEXT NOT NULL,
    text_sha256 BLOB NOT NULL,
    dim INTEGER NOT NULL,
    vector BLOB NOT NULL,
    UNIQUE (model, text_sha256)
)
"""


def text_key(text: str) -> bytes:
    """The cache key of ``text``: the sha256 digest of its UTF-8 bytes (lone surrogates kept)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


@dataclass
class CacheStats:
    """Counters since the cache was opened."""

    #: Texts answered from the file (every occurrence counts).
    hits: int = 0
    #: Distinct texts the backend had to embed (a text repeated within one call counts once).
    misses: int = 0


class CachingEmbedder:
    """An :class:`~m3.embed.base.Embedder` that remembers vectors in a SQLite file.

    Args:
        inner: The backend that computes vectors on a miss.
        path: The SQLite file; created, with its parent directories, on
            first use.
        busy_timeout_s: How long to wait for another process holding the
            file's write lock.

    Thread safety: one instance may be used from any number of threads, and
    any number of processes may share one file. Two callers missing the same
    text at the same moment may both embed it; the first stored vector wins.
    """

    def __init__(self, inner: Embedder, path: Path | str, *, busy_timeout_s: float = 30.0,
                 variant: str = "") -> None:
        """``variant``: a tag the vectors are filed under beside the model id (a query variant's vectors, such as
        MiniLM's 8-bit ones, are not the model's exact vectors and must not answer for them)."""
        self._inner = inner
        self._key = inner.model_id + (f"#{variant}" if variant else "")
        self._path = Path(path).expanduser()
        self._busy_timeout_s = busy_timeout_s
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self.stats = CacheStats()

    @property
    def model_id(self) -> str:
        """The wrapped backend's model id (vectors are stored under it)."""
        return self._inner.model_id

    @property
    def dim(self) -> int:
        """The wrapped backend's dimension."""
        return self._inner.dim

    @property
    def path(self) -> Path:
        """The cache file."""
        return self._path

    def for_queries(self, cache_dir: Path | None = None) -> CachingEmbedder:
        """The wrapped backend's query variant (``for_queries``) behind this file, its vectors filed apart; this
        cache itself when the backend has none."""
        for_queries = getattr(self._inner, "for_queries", None)
        if for_queries is None:
            return self
        queries = for_queries(cache_dir)
        queries.load()  # its precision is known once loaded (exact where the 8-bit model cannot be derived)
        return CachingEmbedder(queries, self._path, busy_timeout_s=self._busy_timeout_s,
                               variant=f"queries-{queries.precision}")

    @property
    def inner(self) -> Embedder:
        """The wrapped backend."""
        return self._inner

    def __repr__(self) -> str:
        return f"CachingEmbedder({self._inner!r}, path={str(self._path)!r})"

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Embed ``texts`` as the wrapped backend would, answering repeats from the cache.

        See :meth:`m3.embed.base.Embedder.embed` for the contract.

        Raises:
            InvalidArgument: ``texts`` is a bare ``str`` or holds a non-string.
            EmbedderUnavailable: the backend is needed for a miss and cannot
                run, or returned a matrix of the wrong shape.
        """
        check_texts(texts)
        model, dim = self._key, self.dim
        out = np.zeros((len(texts), dim), dtype=np.float32)
        if not texts:
            return out
        keys = [text_key(text) for text in texts]
        positions: dict[bytes, list[int]] = {}
        for i, key in enumerate(keys):
            positions.setdefault(key, []).append(i)
        found = self._lookup(model, dim, list(positions))
        for key, vector in found.items():
            out[positions[key]] = vector
        missing = [key for key in positions if key not in found]
        if missing:
            computed = self._compute(texts, [positions[key][0] for key in missing], dim)
            for key, vector in zip(missing, computed, strict=True):
                out[positions[key]] = vector
            self._store(model, dim, missing, computed)
        with self._lock:
            self.stats.hits += len(texts) - sum(len(positions[key]) for key in missing)
            self.stats.misses += len(missing)
        return out

    def peek(self, texts: Sequence[str]) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.bool_]]:
        """The stored vectors of ``texts`` without computing any: ``(matrix, found)``.

        Rows whose ``found`` entry is false are zeros. Nothing is counted in
        :attr:`stats` and the backend is never called.

        Raises:
            InvalidArgument: ``texts`` is a bare ``str`` or holds a non-string.
        """
        check_texts(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        found_mask = np.zeros(len(texts), dtype=bool)
        keys = [text_key(text) for text in texts]
        found = self._lookup(self._key, self.dim, list(dict.fromkeys(keys)))
        for i, key in enumerate(keys):
            vector = found.get(key)
            if vector is not None:
                out[i] = vector
                found_mask[i] = True
        return out, found_mask

    def count(self) -> int:
        """How many vectors of the wrapped backend's model the file holds."""
        with self._lock:
            conn = self._connect()
            row = conn.execute("SELECT count(*) FROM embedding_cache WHERE model = ?", (self._key,)).fetchone()
        return int(row[0])

    def close(self) -> None:
        """Close the file; a later call opens it again."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    # ---------------------------------------------------------------- internals

    def _compute(self, texts: Sequence[str], indices: list[int], dim: int) -> npt.NDArray[np.float32]:
        """Embed the texts at ``indices`` in one backend call and check the result's shape."""
        matrix = np.asarray(self._inner.embed([texts[i] for i in indices]), dtype=np.float32)
        if matrix.shape != (len(indices), dim):
            raise EmbedderUnavailable(
                f"the embedder {self.model_id!r} returned shape {matrix.shape} for {len(indices)} texts "
                f"of dimension {dim}",
                hint="The backend is misconfigured; check its model and dimension.",
            )
        return matrix

    def _connect(self) -> sqlite3.Connection:
        """The open connection, opening (and creating) the file first if needed; caller holds the lock."""
        if self._conn is None:
            self._path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self._path, timeout=self._busy_timeout_s, check_same_thread=False,
                                   isolation_level=None)
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
                conn.execute(_SCHEMA)
            except sqlite3.Error:
                conn.close()
                raise
            self._conn = conn
        return self._conn

    def _lookup(self, model: str, dim: int, keys: list[bytes]) -> dict[bytes, npt.NDArray[np.float32]]:
        """Stored vectors of ``model`` for ``keys``; rows of another dimension are left out."""
        found: dict[bytes, npt.NDArray[np.float32]] = {}
        try:
            with self._lock:
                conn = self._connect()
                for chunk in _chunks(keys, LOOKUP_CHUNK):
                    marks = ",".join("?" * len(chunk))
                    rows = conn.execute(
                        f"SELECT text_sha256, dim, vector FROM embedding_cache "
                        f"WHERE model = ? AND text_sha256 IN ({marks})",
                        (model, *chunk),
                    ).fetchall()
                    for key, stored_dim, blob in rows:
                        if stored_dim == dim and len(blob) == 4 * dim:
                            found[bytes(key)] = np.frombuffer(blob, dtype="<f4")
        except (sqlite3.Error, OSError) as exc:
            log.warning("embedding cache %s unreadable, embedding without it: %s", self._path, exc)
            return {}
        return found

    def _store(self, model: str, dim: int, keys: list[bytes], matrix: npt.NDArray[np.float32]) -> None:
        """Remember the vectors of ``keys`` in one transaction; failures are logged, not raised."""
        blobs = np.ascontiguousarray(matrix, dtype="<f4")
        rows = [(model, key, dim, blobs[i].tobytes()) for i, key in enumerate(keys)]
        try:
            with self._lock:
                conn = self._connect()
                conn.execute("BEGIN IMMEDIATE")
                try:
                    conn.executemany(
                        "INSERT INTO embedding_cache (model, text_sha256, dim, vector) VALUES (?, ?, ?, ?) "
                        "ON CONFLICT (model, text_sha256) DO UPDATE SET dim = excluded.dim, "
                        "vector = excluded.vector WHERE embedding_cache.dim != excluded.dim",
                        rows,
                    )
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
        except (sqlite3.Error, OSError) as exc:
            log.warning("could not store %d vectors in the embedding cache %s: %s", len(rows), self._path, exc)


def _chunks(items: list[bytes], size: int) -> Iterator[list[bytes]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
