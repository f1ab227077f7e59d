"""What a Searcher builds once per filter and runs again on later searches: the filter's clauses and the
statements on them.

SQLAlchemy pays for a statement in Python each time one is built: the expression objects, then its cache key,
a walk over the whole statement on its first run. A search under a filter built four of them (the filter's
clause, the keyword statement, the candidates' rows, the rows the dense leg proposed), about 1.3 ms of a 9 ms
search at 1k memories (``benchmarks.search_undo --change statements-per-filter``). Kept, a statement keeps its
cache key, and a search runs it with new parameters. The search's time goes in as a parameter read when each
statement runs (:func:`m3.store.filters.now_parameter`), so a kept clause never counts from a stale time.

One :class:`KeptStatements` per Searcher (it lives on the Searcher's thread and the helper thread of the search
in progress); it holds the statements of the :data:`FILTERS_KEPT` filters used last.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import BindParameter, ColumnElement

from m3.protocols.messages.memory import MemoryFilter
from m3.store.filters import now_parameter, search_clause

#: Filters whose statements a Searcher keeps (the ones used last): agents' filters differ by agent and type.
FILTERS_KEPT = 64


@dataclass
class FilterStatements:
    """One filter's clauses and the statements built on them, each made on first use."""

    filter: MemoryFilter
    now: BindParameter[datetime]
    #: Everything a search under the filter may see (:func:`m3.store.filters.search_clause`).
    clause: ColumnElement[bool]
    #: The same rows, written for a search that adds a window of valid time (made when first asked for).
    _by_valid_time: ColumnElement[bool] | None = None
    #: The candidates' row statements (:class:`m3.retrieval.candidate_rows.CandidateRows` keeps them here).
    rows: dict[Any, Any] = field(default_factory=dict)
    #: The keyword leg's statements (the dialect's ``memory_hits`` keeps them here).
    keyword: dict[Any, Any] = field(default_factory=dict)

    @property
    def by_valid_time(self) -> ColumnElement[bool]:
        if self._by_valid_time is None:
            self._by_valid_time = search_clause(self.filter, self.now, by_valid_time=True)
        return self._by_valid_time


class KeptStatements:
    """A Searcher's statements per filter, the :data:`FILTERS_KEPT` used last, and the time they count from."""

    def __init__(self, size: int = FILTERS_KEPT):
        self._size = size
        self._kept: OrderedDict[MemoryFilter, FilterStatements] = OrderedDict()
        self._now = datetime.now(UTC)
        self._now_parameter = now_parameter(self._read_now)

    def _read_now(self) -> datetime:
        return self._now

    def at(self, now: datetime, flt: MemoryFilter) -> FilterStatements:
        """The statements of ``flt``, which count from ``now`` until the next call (the search in progress)."""
        self._now = now
        kept = self._kept.get(flt)
        if kept is None:
            kept = FilterStatements(flt, self._now_parameter, search_clause(flt, self._now_parameter))
            self._kept[flt] = kept
            if len(self._kept) > self._size:
                self._kept.popitem(last=False)
        else:
            self._kept.move_to_end(flt)
        return kept
