"""The rows of one search's candidates: loaded narrow, completed only where needed.

Ranking reads a few small columns (:data:`~m3.store.memories.RANKING_COLUMNS`, one query for every
candidate); the others (content, metadata, source, the times of the item shown) only the k results, the
fresh memories embedded on the spot and MMR's word overlap need. A row gets them when the Searcher asks
(:meth:`CandidateRows.complete`) or, the first time any row is asked for a column it lacks, every row
not completed yet gets them in one query: never one query per row. All of it runs inside the
Searcher's read transaction.

Where the dense leg holds no vectors between searches (PostgreSQL), the keyword matches' rows read while the
query still embeds come with the stored vector of the search's model (:attr:`CandidateRows.vectors`): they
need it for MMR and their cosine, and a statement of its own after the query's vector is there costs a round
trip. Rows read after that come without: the dense hits have theirs already, and reading every candidate's
vector with its row cost more than the round trip (docs/benchmarks.md).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import Connection, select

from m3.store import id_reads
from m3.store.schema import memories as m
from m3.store.schema import memory_embeddings as e

#: Every column of a memory row.
ALL_COLUMNS = frozenset(c.name for c in m.c)
#: The label of the stored vector read beside a row (not a column of memories).
_VECTOR = "m3_stored_vector"


class CandidateRow(Mapping[str, Any]):
    """A memory row as a read-only mapping; columns beyond the ranking ones are loaded on first use."""

    __slots__ = ("_owner", "_values")

    def __init__(self, owner: CandidateRows, values: dict[str, Any]):
        """``values``: the row's columns so far, a dict this row takes over."""
        self._owner = owner
        self._values = values

    def __getitem__(self, key: str) -> Any:
        try:
            return self._values[key]
        except KeyError:
            if key not in ALL_COLUMNS:
                raise
        self._owner.complete_all()
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        self._owner.complete_all()
        return iter(self._values)

    def __len__(self) -> int:
        return len(ALL_COLUMNS)

    @property
    def complete(self) -> bool:
        return len(self._values) == len(ALL_COLUMNS)

    def _fill(self, full: Mapping[Any, Any]) -> None:
        self._values.update(full)


class CandidateRows:
    """Narrow rows of one search's candidates under one filter, completed on demand; lives for one request."""

    def __init__(self, conn: Connection, where: Any, *, vector_model: str | None = None,
                 kept: dict[Any, Any] | None = None):
        """``vector_model``: read each row with its stored vector of this model (see :attr:`vectors`); ``kept``:
        where the statements for ``where`` on ``conn`` are kept from one search to the next (default: this
        object's own, for one request)."""
        self._conn = conn
        #: The search's filter: only rows satisfying it are loaded, so a loaded row has passed it.
        self._where = where
        self._rows: dict[str, CandidateRow] = {}
        #: The ``vector_model`` vectors of rows read ``with_vectors`` that have one, by id.
        self.vectors: dict[str, npt.NDArray[np.float32]] = {}
        #: Ids read ``with_vectors`` (found or not): any of them missing from :attr:`vectors` has no vector.
        self.read_with_vectors: set[str] = set()
        #: One statement per column set, built on first use and run for every id list (of later searches too).
        self._readers: dict[Any, Any] = {} if kept is None else kept
        self._with_vectors: tuple[Any, ...] | None = None
        if vector_model is not None:
            self._with_vectors = self._readers.get((_VECTOR, vector_model))
            if self._with_vectors is None:
                # By the (memory_id, model) key, row by row: never a join (see m3.store.vectors.vectors_of).
                stored = select(e.c.vector).where(e.c.memory_id == m.c.id, e.c.model == vector_model)
                columns = (*id_reads.RANKING_COLUMNS, stored.scalar_subquery().label(_VECTOR))
                self._with_vectors = self._readers[(_VECTOR, vector_model)] = columns
        self._full: id_reads.IdReader | None = None

    def columns(self, *, with_vectors: bool = False) -> tuple[Any, ...]:
        """What :meth:`fetch` reads of a row (``with_vectors``: with its stored vector, given a ``vector_model``),
        for a statement that reads candidates under the same filter on its own (the keyword leg's)."""
        if with_vectors and self._with_vectors is not None:
            return self._with_vectors
        return id_reads.RANKING_COLUMNS

    def adopt(self, rows: Mapping[str, dict[str, Any]], *, with_vectors: bool = False) -> None:
        """Take ``rows`` (:meth:`columns` of memories read under this filter, by id, given the same
        ``with_vectors``) as if :meth:`fetch` had read them; the dicts are taken over."""
        if with_vectors and self._with_vectors is not None:
            self.read_with_vectors.update(rows)
        for memory_id, row in rows.items():
            if memory_id not in self._rows:
                self._keep(memory_id, row)

    def fetch(self, ids: Sequence[str], *, with_vectors: bool = False) -> dict[str, CandidateRow]:
        """Ranking columns of those of ``ids`` that satisfy the filter, read once per id (one query per 500 ids
        not loaded yet); ``with_vectors`` (and a ``vector_model``): the rows not loaded yet come with their
        vector."""
        missing = [i for i in dict.fromkeys(ids) if i not in self._rows]
        if missing:
            columns = self.columns(with_vectors=with_vectors)
            if columns is self._with_vectors:
                self.read_with_vectors.update(missing)
            reader = self._readers.get(columns)
            if reader is None:
                reader = self._readers[columns] = id_reads.IdReader(self._conn, self._where, columns)
            for memory_id, row in reader(missing).items():
                self._keep(memory_id, row)
        return {i: self._rows[i] for i in ids if i in self._rows}

    def _keep(self, memory_id: str, row: dict[str, Any]) -> None:
        vector = row.pop(_VECTOR, None)
        if vector is not None:
            self.vectors[memory_id] = vector
        self._rows[memory_id] = CandidateRow(self, row)

    def passing(self, ids: Sequence[str]) -> set[str]:
        """Those of ``ids`` that satisfy the filter, their rows kept for ranking (the dense leg's check)."""
        return set(self.fetch(ids))

    def complete(self, ids: Sequence[str]) -> None:
        """Load every column of the rows among ``ids`` that lack some."""
        todo = [i for i in ids if i in self._rows and not self._rows[i].complete]
        if not todo:
            return
        if self._full is None:
            self._full = id_reads.IdReader(self._conn)
        full = self._full(todo)
        for memory_id in todo:
            if memory_id in full:
                self._rows[memory_id]._fill(full[memory_id])

    def complete_all(self) -> None:
        self.complete(list(self._rows))
