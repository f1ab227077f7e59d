"""The Searcher's dense (by meaning) retrieval leg, one per store (docs/postgres.md for PostgreSQL).

* SQLite, :class:`MatrixLeg`: the active model's vectors in an in-memory float32 matrix (brute force,
  exact), loading what was added since it last looked before each search; the filters run in SQL on
  the ids it proposes, and when they prune too much, it ranks among the ids they admit.
* PostgreSQL, :class:`SqlLeg`: the model's HNSW index with the filters in one statement, and an exact
  scan of the filtered rows when the index yields fewer than asked; no vectors held between searches. Given
  a second connection, it proposes there, on the query embedding's thread, while the Searcher's connection
  runs the keyword leg (the server works both statements at once).

Both return the hits that pass the filters, best first, as (id, cosine), and the candidates' vectors
(for MMR and fresh-write scoring); the Searcher loads the rows it ranks.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
from sqlalchemy import Connection, select
from sqlalchemy.exc import SQLAlchemyError

from m3.retrieval.vector_index import VectorIndex
from m3.store import archive_writes, vectors
from m3.store import memories as rows
from m3.store.dialect import Dialect
from m3.store.schema import memories as m

Vector = npt.NDArray[np.float32]
Hits = list[tuple[str, float]]
#: Which of these memory ids pass the search's filter (the Searcher's row loader, which keeps the rows it reads).
Passing = Callable[[Sequence[str]], Collection[str]]
#: Opens a connection of the Searcher's own (a second one beside its main connection) for the helper thread.
SideConnection = Callable[[], Connection]

log = logging.getLogger(__name__)


class DenseLeg(Protocol):
    #: The leg holds no vectors between searches, so the Searcher reads the keyword matches' stored vectors with
    #: their rows while the query embeds (:class:`m3.retrieval.candidate_rows.CandidateRows`) instead of asking
    #: :meth:`vectors` for them afterwards.
    vectors_with_rows: bool

    def ready(self, conn: Connection, model: str) -> bool:
        """True when ``model`` has stored vectors (refreshing what the leg knows)."""

    def propose(self, query: Vector, n: int, include_archived: bool = False, clause: Any = None) -> Hits | None:
        """What :meth:`top` would check first for ``n`` hits under ``clause`` (the search's filter, when known),
        computed without the Searcher's connection (so on another thread, while the Searcher's runs the keyword
        leg); None when the leg has nothing to propose that way."""

    def propose_narrow(self, query: Vector, clause: Any, n: int) -> Hits | None:
        """:meth:`top` with ``narrow`` for ``clause`` and ``n``, computed without the Searcher's connection (the
        time leg's window, beside the keyword leg); None when the leg cannot do that apart."""

    def top(self, conn: Connection, model: str, query: Vector, clause: Any, n: int,
            include_archived: bool = False, *, narrow: bool = False, proposed: Hits | None = None,
            passing: Passing | None = None) -> Hits:
        """The ``n`` best hits passing ``clause`` (which says whether archived memories count); ``narrow``: the
        clause admits few memories (a window of valid time), so rank among those it admits at once;
        ``proposed``: :meth:`propose`'s answer for this query, ``n`` and ``include_archived``; ``passing``: checks
        ids against ``clause`` where the leg checks them outside SQL (default: a query of its own)."""

    def vectors(self, conn: Connection, model: str, ids: Sequence[str]) -> dict[str, Vector]:
        """Stored vectors of ``ids`` (those that have one)."""

    def forget(self, ids: Iterable[str]) -> None:
        """Memories erased for good."""

    def archived(self, ids: Iterable[str], archived: bool) -> None:
        """Memories archived (``archived``) or restored: whether default searches skip their vectors."""

    def size(self) -> int | None:
        """Vectors held in memory (None when the leg holds none between searches)."""


#: Most nearest memories the in-memory leg checks against the filter per hit asked, before it ranks among the
#: memories the filter admits instead.
PROPOSED_PER_HIT = 4


def first_checked(n: int) -> int:
    """How many nearest memories the in-memory leg proposes and checks first for ``n`` hits: most searches keep
    every one, so the next ones (up to ``n * PROPOSED_PER_HIT``) are ranked only when some fail the filter."""
    return n + n // 4 + 8


class MatrixLeg:
    """Brute force over an in-memory matrix, refreshed incrementally by ``seq``."""

    vectors_with_rows = False

    def __init__(self) -> None:
        self.index = VectorIndex(int8_copy=True)

    def ready(self, conn: Connection, model: str) -> bool:
        while True:
            last, ids, matrix = vectors.load_after(conn, model, self.index.last_seq)
            if not ids:
                return len(self.index) > 0
            self.index.add(ids, matrix)
            # Vectors of archived memories (loaded at start, or re-embedded) are hidden like those the Writer
            # reports; the SQL clause stays the rule, this only keeps them out of the proposals.
            self.index.hide(archive_writes.archived_ids(conn, ids))
            self.index.last_seq = last

    def propose(self, query: Vector, n: int, include_archived: bool = False, clause: Any = None) -> Hits | None:
        return self.index.top(query, first_checked(n), include_hidden=include_archived)

    def propose_narrow(self, query: Vector, clause: Any, n: int) -> Hits | None:
        return None  # which memories a window admits is read on the Searcher's connection

    def top(self, conn: Connection, model: str, query: Vector, clause: Any, n: int,
            include_archived: bool = False, *, narrow: bool = False, proposed: Hits | None = None,
            passing: Passing | None = None) -> Hits:
        if narrow:
            return self.index.top(query, n, self._admitted(conn, clause))
        first = first_checked(n)
        if proposed is None:
            proposed = self.index.top(query, first, include_hidden=include_archived)
        check = passing or (lambda ids: rows.visible_ids(conn, ids, clause))
        # Most searches keep every proposal: check the first few, and the next ones only when some failed.
        hits = self._passing(check, proposed[:first])
        if len(hits) < n:
            proposed = self.index.top(query, n * PROPOSED_PER_HIT, include_hidden=include_archived)
            hits += self._passing(check, proposed[first:])
        hits = hits[:n]
        if len(hits) < n and len(proposed) < len(self.index):
            # The filters pruned the global top: rank among the ids they admit.
            hits = self.index.top(query, n, self._admitted(conn, clause))
        return hits

    @staticmethod
    def _passing(check: Passing, proposed: Hits) -> Hits:
        visible = check([i for i, _ in proposed])
        return [(i, s) for i, s in proposed if i in visible]

    @staticmethod
    def _admitted(conn: Connection, clause: Any) -> list[str]:
        return [r[0] for r in conn.execute(select(m.c.id).where(clause).limit(500_000))]

    def vectors(self, conn: Connection, model: str, ids: Sequence[str]) -> dict[str, Vector]:
        found = {memory_id: self.index.vector(memory_id) for memory_id in ids}
        return {memory_id: vec for memory_id, vec in found.items() if vec is not None}

    def forget(self, ids: Iterable[str]) -> None:
        self.index.remove(ids)

    def archived(self, ids: Iterable[str], archived: bool) -> None:
        self.index.hide(ids, archived)

    def size(self) -> int | None:
        return len(self.index)


#: Most memories a narrow filter (a named window of time) may admit for the PostgreSQL leg to compare every one
#: of them instead of walking the HNSW index, whose filtered scan passes over every row the filter rejects: on
#: 100k memories windows of 2.6k-5.4k rows took 86-136 ms through the index and 39-73 ms row by row, one of
#: 69k rows 10 ms through the index and 305 ms row by row (docs/postgres.md).
EXACT_SCAN_MAX_ROWS = 5000


class SqlLeg:
    """pgvector HNSW in SQL, filters in the same statement; keeps only the current search's vectors."""

    vectors_with_rows = True

    def __init__(self, side: SideConnection | None = None) -> None:
        #: Where :meth:`propose` runs its statement (None: it proposes nothing and :meth:`top` does the work).
        self._side = side
        self._model: str | None = None
        self._seen: dict[str, Vector] = {}
        #: The model had stored vectors at some search: a leg serves one model, and a store whose vectors were all
        #: erased since only finds nothing by meaning, so the question is not asked again (a round trip a search).
        self._had_vectors = False

    def ready(self, conn: Connection, model: str) -> bool:
        from m3.store.postgres import has_vectors

        self._seen = {}
        self._model = model
        self._had_vectors = self._had_vectors or has_vectors(conn, model)
        return self._had_vectors

    def propose(self, query: Vector, n: int, include_archived: bool = False, clause: Any = None) -> Hits | None:
        # Its own snapshot, taken a moment after the Searcher's: a hit committed in between is dropped when the
        # Searcher loads the rows under its snapshot; a write acknowledged before the search is in both.
        return self._apart(query, clause, n, narrow=False)

    def propose_narrow(self, query: Vector, clause: Any, n: int) -> Hits | None:
        return self._apart(query, clause, n, narrow=True)

    def _apart(self, query: Vector, clause: Any, n: int, *, narrow: bool) -> Hits | None:
        if self._side is None or clause is None or self._model is None:
            return None
        try:
            with self._side() as side, side.begin():
                return self._top(side, self._model, query, clause, n, narrow=narrow)
        except SQLAlchemyError as exc:
            log.warning("the dense leg's second connection failed (%s); it runs on the Searcher's", exc)
            return None

    def top(self, conn: Connection, model: str, query: Vector, clause: Any, n: int,
            include_archived: bool = False, *, narrow: bool = False, proposed: Hits | None = None,
            passing: Passing | None = None) -> Hits:
        if proposed is not None and not narrow:
            return proposed  # ranked in SQL under the same clause: the Searcher's row loading checks it again
        return self._top(conn, model, query, clause, n, narrow=narrow)

    def _top(self, conn: Connection, model: str, query: Vector, clause: Any, n: int, *, narrow: bool = False) -> Hits:
        from m3.store.pg_nearest import nearest

        dim = int(query.shape[0])
        if narrow and rows.count_at_most(conn, clause, EXACT_SCAN_MAX_ROWS) <= EXACT_SCAN_MAX_ROWS:
            found = nearest(conn, model, dim, query, clause, n, exact=True)
        else:
            found = nearest(conn, model, dim, query, clause, n)
            if len(found) < n:
                # The index gave up before n visible rows (a narrow filter): compare every admitted row.
                found = nearest(conn, model, dim, query, clause, n, exact=True)
        # Every hit of this search keeps its vector (the time leg's too), for MMR and fresh-write scoring.
        self._seen.update((memory_id, vec) for memory_id, _, vec in found)
        return [(memory_id, cosine) for memory_id, cosine, _ in found]

    def vectors(self, conn: Connection, model: str, ids: Sequence[str]) -> dict[str, Vector]:
        out = {i: self._seen[i] for i in ids if i in self._seen}
        missing = [i for i in ids if i not in out]
        if missing:
            out.update(vectors.vectors_of(conn, model, missing))
        return out

    def forget(self, ids: Iterable[str]) -> None:
        return None  # it holds the vectors of the search being answered only

    def archived(self, ids: Iterable[str], archived: bool) -> None:
        return None  # the clause in SQL leaves archived rows out

    def size(self) -> int | None:
        return None


def leg_for(dialect: Dialect, side: SideConnection | None = None) -> DenseLeg:
    """pgvector SQL where the database ranks vectors itself (proposing on ``side`` connections, when given);
    else an in-memory matrix."""
    return SqlLeg(side) if dialect.nearest_in_sql else MatrixLeg()
