"""An in-memory, brute-force vector index owned by one Searcher.

Rows are L2-normalised float32, so cosine is a dot product. Capacity grows
by doubling; a replaced vector overwrites its row; a removed one is masked.
Brute force is exact and, measured here, 2 ms at 10k x 384 and 17-32 ms at
100k x 384 on one core, which is why no approximate index is used on SQLite.
Scores and order come from :mod:`m3.retrieval.native` (the native core or
its numpy twin, the same results either way). Search's index, where the
native core is installed, also keeps an int8 copy of the matrix (a quarter
more memory), which the core scans instead of the f32 rows once they no
longer fit in the processor's cache, with the same results (docs/search.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import numpy.typing as npt

from m3.retrieval import native

Matrix = npt.NDArray[np.float32]


class VectorIndex:
    def __init__(self, *, int8_copy: bool = False) -> None:
        """``int8_copy``: keep the int8 copy the native core scans from ``native.INT8_FROM_ROWS`` rows (search's
        index; the Writer's small per-owner indexes do without)."""
        self._wants_int8 = int8_copy
        self.dim = 0  # set by the first vectors added
        self._mat: Matrix = np.zeros((0, 0), dtype=np.float32)
        self._alive = np.zeros(0, dtype=bool)
        #: Each row's L2 norm: the numpy path's shortlist bound needs it.
        self._norm = np.zeros(0, dtype=np.float32)
        self._ids: list[str] = []
        self._row: dict[str, int] = {}
        #: Rows of archived memories: kept (restoring needs no reload) but left out of a search by default.
        self._hidden = np.zeros(0, dtype=bool)
        self._int8: native.Int8Copy | None = None
        self.last_seq = 0

    def __len__(self) -> int:
        return len(self._row)

    def add(self, ids: Sequence[str], matrix: Matrix) -> None:
        """Insert or replace one row per id."""
        if not ids:
            return
        if self.dim == 0:
            self.dim = int(matrix.shape[1])
            self._mat = np.zeros((0, self.dim), dtype=np.float32)
            self._int8 = native.int8_copy(self.dim) if self._wants_int8 else None
        if matrix.shape[1] != self.dim:
            raise ValueError(f"vector dim {matrix.shape[1]} does not match index dim {self.dim}")
        placed = np.zeros(len(ids), dtype=np.int64)
        for i, (memory_id, vec) in enumerate(zip(ids, matrix, strict=True)):
            row = self._row.get(memory_id)
            if row is None:
                row = self._append_row(memory_id)
            self._mat[row] = vec
            self._norm[row] = np.linalg.norm(self._mat[row])
            self._alive[row] = True
            placed[i] = row
        if self._int8 is not None:
            self._int8.grow(self._mat.shape[0])
            # From the stored rows (an id given twice ends as its last vector, in both copies).
            self._int8.set(placed, self._mat[placed])

    def _append_row(self, memory_id: str) -> int:
        row = len(self._ids)
        if row >= self._mat.shape[0]:
            extra = max(1024, 2 * row) - row  # zero rows, not alive
            self._mat = np.pad(self._mat, ((0, extra), (0, 0)))
            self._alive = np.pad(self._alive, (0, extra))
            self._norm = np.pad(self._norm, (0, extra))
            self._hidden = np.pad(self._hidden, (0, extra))
        self._ids.append(memory_id)
        self._row[memory_id] = row
        return row

    def remove(self, ids: Iterable[str]) -> None:
        for memory_id in ids:
            row = self._row.pop(memory_id, None)
            if row is not None:
                self._alive[row] = False
                self._hidden[row] = False
                self._mat[row] = 0.0
                self._norm[row] = 0.0
                if self._int8 is not None:
                    self._int8.clear(row)

    def hide(self, ids: Iterable[str], hidden: bool = True) -> None:
        """Leave ``ids`` out of :meth:`top` unless asked (archived memories); ``hidden=False`` takes them back."""
        for memory_id in ids:
            row = self._row.get(memory_id)
            if row is not None:
                self._hidden[row] = hidden

    def hidden_count(self) -> int:
        return int(self._hidden[:len(self._ids)].sum())

    def vector(self, memory_id: str) -> Matrix | None:
        row = self._row.get(memory_id)
        return None if row is None else self._mat[row]

    def top(self, query: Matrix, n: int, allowed: Sequence[str] | None = None, *,
            include_hidden: bool = False) -> list[tuple[str, float]]:
        """The ``n`` most similar ids with their cosine, best first (ties: the earlier added first);
        only ``allowed`` ids when given, else every live row but the hidden ones unless ``include_hidden``."""
        used = len(self._ids)
        if used == 0 or n <= 0:
            return []
        if allowed is not None:
            rows = np.fromiter(sorted({self._row[i] for i in allowed if i in self._row}), dtype=np.int64)
        else:
            live = self._alive[:used] if include_hidden else self._alive[:used] & ~self._hidden[:used]
            rows = np.flatnonzero(live).astype(np.int64)
        found, sims = native.top_rows(self._mat[:used], self._norm[:used], query, n, rows, self._int8)
        return [(self._ids[int(r)], float(s)) for r, s in zip(found, sims, strict=True)]

    def ids_above(self, ids: Sequence[str], threshold: float) -> list[list[str]]:
        """For each of ``ids`` (ids in this index), the ids shown by default whose cosine with its vector may
        exceed ``threshold``: all that do and perhaps a few just under (one matrix product for all of them).

        :meth:`top` with them as ``allowed`` then gives exactly the hits above ``threshold`` that it gives
        over every row shown by default.
        """
        used = len(self._ids)
        queries = self._mat[[self._row[i] for i in ids]]
        live = self._alive[:used] & ~self._hidden[:used]
        found = native.rows_above(self._mat[:used], self._norm[:used], queries, live, threshold)
        return [[self._ids[int(r)] for r in rows] for rows in found]

