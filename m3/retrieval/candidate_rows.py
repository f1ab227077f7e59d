"""The rows of one search's candidates: loaded narrow, completed only where needed.

A search weighs a few hundred candidates and returns k of them. Ranking
reads small columns (importance, pin, times, access count, title); the
large ones (content, metadata, source) are needed only by the k results,
by the few fresh memories whose vector is computed on the spot, and by
MMR's word overlap for memories without a vector. So candidates are loaded
with :data:`~m3.store.memories.RANKING_COLUMNS` in one query, and a
:class:`CandidateRow` gets its other columns when asked:

* explicitly, for the rows the Searcher knows it needs (:meth:`CandidateRows.complete`);
* implicitly, the first time any row is asked for a column it does not
  hold: then every row of the search not completed yet is completed in one
  query, so code reading a large column of every candidate costs one extra
  query, never one per row.

All of it runs inside the Searcher's read transaction: one snapshot.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, RowMapping

from m3.store import memories as rows
from m3.store.schema import memories as m

#: Every column of a memory row.
ALL_COLUMNS = frozenset(c.name for c in m.c)


class CandidateRow(Mapping[str, Any]):
    """A memory row as a read-only mapping; columns beyond the ranking ones are loaded on first use."""

    __slots__ = ("_owner", "_values")

    def __init__(self, owner: CandidateRows, values: Mapping[Any, Any]):
        self._owner = owner
        self._values = dict(values)

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
    """Narrow rows of one search's candidates, completed on demand; lives for one request."""

    def __init__(self, conn: Connection):
        self._conn = conn
        self._rows: dict[str, CandidateRow] = {}

    def fetch(self, ids: Sequence[str], where: Any) -> dict[str, CandidateRow]:
        """Ranking columns of those of ``ids`` that satisfy ``where`` (one query per 500 ids)."""
        found = rows.rows_by_ids(self._conn, ids, where, columns=rows.RANKING_COLUMNS)
        out = {memory_id: CandidateRow(self, row) for memory_id, row in found.items()}
        self._rows.update(out)
        return out

    def complete(self, ids: Sequence[str]) -> None:
        """Load every column of the rows among ``ids`` that lack some."""
        todo = [i for i in ids if i in self._rows and not self._rows[i].complete]
        if not todo:
            return
        full: dict[str, RowMapping] = rows.rows_by_ids(self._conn, todo)
        for memory_id in todo:
            if memory_id in full:
                self._rows[memory_id]._fill(full[memory_id])

    def complete_all(self) -> None:
        self.complete(list(self._rows))
