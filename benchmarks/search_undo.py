"""Search as this checkout does it, against the same search with one of its changes undone, interleaved.

``python -m benchmarks.search_undo --change CHANGE --store sqlite --size 10000 [--queries 300] [--live]
[--url URL]``: one new store (or the filled store at ``--url``) holds ``size`` distinct LongMemEval_S turns
(``perf_search``'s fill, vectors from the embedding cache) and is let settle. One Searcher then answers each
question twice, once as it is (``now``) and once with ``CHANGE`` undone (``undone``), alternating which goes
first, in one process on one store. The changes:

* ``int8-scan`` (SQLite, native core): the in-memory index scanned through its int8 copy from
  ``native.INT8_FROM_ROWS`` rows (or ``--int8-from-rows``); undone, the f32 matrix is scanned;
* ``row-vectors`` (PostgreSQL): the candidates' vectors read with their rows; undone, in a statement of their
  own once the query's vector is there;
* ``ids-drive`` (SQLite): reads of given ids (the candidates' rows) run with the ids as the outer loop; undone,
  SQLite chooses, as it did before, an index of the filter (``--type T`` searches with ``type=T``: the filled
  turns are of type ``conversation``);
* ``window-drive`` (SQLite): under a type filter, the memories valid in a window the question names are found
  through the valid-time index; undone, through the type's (with ``--type``);
* ``unlisted-counted`` (PostgreSQL): a query lexeme ``pg_stats`` does not list is counted (up to the budget) when
  the keyword leg picks the lexemes whose rows it ranks; undone, it counts as 0 rows;
* ``lexemes-kept`` (PostgreSQL): the keyword leg picks its selecting lexemes with the statistics its connection
  keeps (``pg_stats`` read again after ANALYZE or a minute, unlisted lexemes counted once a minute); undone, in
  one statement per search that reads them all again (:mod:`benchmarks.pg_selection_sql`, the rule until
  2026-12-05);
* ``embedding-first`` (either store): the query starts embedding before the search's filter and the times its
  query names are worked out; undone, after them (as until 2026-12-05);
* ``first-proposals`` (SQLite): the in-memory leg proposes the few nearest memories it checks first
  (``dense.first_checked``), and ranks the next ones only when some fail the filter; undone, it proposes
  ``PROPOSED_PER_HIT`` times the hits asked, as until 2026-12-05;
* ``statements-kept`` (either store): a search reads its candidates' rows through statements it builds once
  (``memories.IdReader``) and runs for each id list; undone, it builds one per read, as until 2026-12-05;
* ``signals-early`` (either store): while the query embeds, the keyword hits' signals other than meaning are
  worked out (``ranking.prepare``); undone, all of fusion waits for the query vector, as until 2026-12-05;
* ``full-statement-kept`` (either store): the statement reading the chosen results' whole rows is built once per
  backend (``id_reads._WHOLE_ROWS``) and keeps SQLAlchemy's cache key; undone, one is built per search, as until
  2026-12-05;
* ``int8-queries`` (either store): the query embeds with the model's 8-bit products (``embed.query_int8``,
  :mod:`m3.embed.minilm_queries`); undone, exactly, as until 2026-12-05. The only change here that may change
  answers (the query vector moves within cosine 0.99): how many did is printed, and the retrieval benchmarks
  measure what it does to quality;
* ``broad-filter`` (SQLite): under a field filter holding more than a third of the store (counted in an index),
  the keyword leg checks FTS5's best matches first; undone, it ranks every match under any field filter
  (``--agent A`` searches with ``agent_id=A``: counted in the owner index type by type);
* ``rows-with-hits`` (either store): the keyword statement reads its hits' ranking columns (and, on PostgreSQL,
  stored vectors) itself; undone, it reads ids and scores, and a statement of their own reads the rows, as until
  2026-12-05;
* ``statements-per-filter`` (either store): a Searcher keeps each filter's clause and the statements built on
  it (the keyword statement, the candidates' rows) for its next search under that filter
  (:mod:`m3.retrieval.search_statements`); undone, a search builds them anew, with its time written into the
  clause, as until 2026-12-05;
* ``matches-counted`` (SQLite): the keyword statement over FTS5's best matches says how many there were, so a
  search finding fewer hits than it asks for among them does not rank every match again when they were every
  match; undone, it always does, as until 2026-12-05;
* ``proximity`` (either store): the best candidates' texts are read for the term-proximity signal
  (:mod:`m3.retrieval.proximity`) at ``search.weight_proximity`` = 0.3 (or the weight configured, if not 0);
  undone, the signal weighs 0, the default. Like ``int8-queries`` it changes answers (that is its purpose).

The query is embedded live (MiniLM, one onnxruntime thread) unless ``--cached`` (vectors from the embedding
cache). Prints p50/p95 of each arm, the ratio of the medians (now ÷ undone) and how many questions' answers
(ids in order) differed: none may, each change but ``int8-queries`` and ``proximity`` leaves the results as they
were.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import select, text

from benchmarks import pg_selection_sql
from benchmarks.data import load_longmemeval
from benchmarks.embedding import cached_embedder
from benchmarks.interleaved import WARMUP, as_it_is, compare_on, live_searcher, parser
from benchmarks.perf_search import corpus, on_filled_store
from benchmarks.precomputed import PrecomputedEmbedder
from benchmarks.report import rows_text
from m3.actors.searcher import Searcher
from m3.embed.minilm import MiniLMEmbedder
from m3.protocols.messages.memory import MemoryFilter, SearchMemories
from m3.retrieval import native, ranking, search_statements
from m3.retrieval.candidate_rows import CandidateRows
from m3.retrieval.dense import PROPOSED_PER_HIT, MatrixLeg, SqlLeg
from m3.store import fulltext, id_reads, pg_fulltext
from m3.store import sqlite as sqlite_store
from m3.store.dialect import Dialect
from m3.store.filters import narrows, now_parameter, search_clause
from m3.store.schema import memories as m
from m3.store.sqlite import SqliteDialect

#: The proximity weight measured (docs/search.md, "Term proximity").
PROXIMITY_ON = 0.3

CHANGES = ("int8-scan", "row-vectors", "ids-drive", "window-drive", "broad-filter", "unlisted-counted",
           "lexemes-kept", "embedding-first", "first-proposals", "statements-kept",
           "signals-early", "full-statement-kept", "int8-queries", "rows-with-hits", "statements-per-filter",
           "matches-counted", "proximity")


@contextmanager
def _replaced(owner: Any, **values: Any) -> Iterator[None]:
    """``owner``'s attributes (a module's, a class's or an object's) set to ``values`` for the block, then put back
    as they were; one ``owner`` did not hold itself (an object's method or class value) is removed again."""
    held = vars(owner)
    saved = {name: held[name] for name in values if name in held}
    for name, value in values.items():
        setattr(owner, name, value)
    try:
        yield
    finally:
        for name in values:
            if name in saved:
                setattr(owner, name, saved[name])
            else:
                delattr(owner, name)


def _vectors_apart(searcher: Searcher) -> AbstractContextManager[None]:
    if not isinstance(searcher._dense, SqlLeg):
        raise SystemExit("row-vectors is PostgreSQL's change: use --store postgres")
    return _replaced(searcher._dense, vectors_with_rows=False)


def _type_drives_windows() -> AbstractContextManager[None]:
    def as_before(flt: MemoryFilter, now: Any, *, by_valid_time: bool = False) -> Any:
        return search_clause(flt, now)

    return _replaced(search_statements, search_clause=as_before)


@contextmanager
def _own_statistics(searcher: Searcher) -> Iterator[None]:
    """The arm keeps lexeme statistics of its own on the Searcher's connection (the other arm's are put back)."""
    info = searcher.conn.info
    kept = {key: info.pop(key) for key in list(info) if isinstance(key, tuple) and key[0] == pg_fulltext.KEPT_KEY}
    try:
        yield
    finally:
        for key in [key for key in info if isinstance(key, tuple) and key[0] == pg_fulltext.KEPT_KEY]:
            info.pop(key)
        info.update(kept)


@contextmanager
def _unlisted_as_rare(searcher: Searcher) -> Iterator[None]:
    with _replaced(pg_fulltext, _count_unlisted=lambda conn, table, lexemes: dict.fromkeys(lexemes, 0)), \
            _own_statistics(searcher):
        yield


def _embedding_after_filter(searcher: Searcher) -> AbstractContextManager[None]:
    """The helper starts where the leg is refreshed, after the filter and the named times are worked out."""
    own_start, own_refreshed = searcher._embed_query, searcher._leg_refreshed

    def later(query: str, n: int, include_archived: bool) -> Any:
        return (query, n, include_archived)

    def start_then_refresh(started: Any, clause: Any, window: Any) -> Any:
        return own_refreshed(own_start(*started), clause, window)

    return _replaced(searcher, _embed_query=later, _leg_refreshed=start_then_refresh)


def _proposals_four_per_hit() -> AbstractContextManager[None]:
    def four_per_hit(leg: MatrixLeg, query: Any, n: int, include_archived: bool = False, clause: Any = None) -> Any:
        return leg.index.top(query, n * PROPOSED_PER_HIT, include_hidden=include_archived)

    return _replaced(MatrixLeg, propose=four_per_hit)


class _Forgetful(dict[Any, Any]):
    def __setitem__(self, key: Any, value: Any) -> None:
        return None


def _statement_per_read() -> AbstractContextManager[None]:
    own_init, own_complete = CandidateRows.__init__, CandidateRows.complete

    def init(rows: CandidateRows, *args: Any, **kwargs: Any) -> None:
        own_init(rows, *args, **kwargs)
        rows._readers = _Forgetful()

    def complete(rows: CandidateRows, ids: Any) -> None:
        rows._full = None
        own_complete(rows, ids)

    return _replaced(CandidateRows, __init__=init, complete=complete)


class _Unkept:
    """A Searcher's statements as before they were kept: built for each search, its time written in."""

    def at(self, now: datetime, flt: MemoryFilter) -> search_statements.FilterStatements:
        return search_statements.FilterStatements(flt, now_parameter(lambda: now), search_clause(flt, now))


def _matches_uncounted() -> AbstractContextManager[None]:
    """FTS5's best matches without their count: fewer hits than asked for always means a second statement."""
    best = text(f"{sqlite_store._FTS5_ALL.text} ORDER BY {sqlite_store._FTS5_SCORE}, rowid DESC LIMIT :top")

    def within(conn: Any, matches: Any, where: Any, limit: int, top: int, columns: Any = (), **given: Any) -> Any:
        hits = fulltext.ranked(conn, best, where, limit, columns, **given)
        return hits if len(hits) == limit else None

    return _replaced(fulltext, ranked_within=within)


def _hits_without_rows(searcher: Searcher) -> AbstractContextManager[None]:
    own = searcher._dialect.memory_hits

    def ids_and_scores(conn: Any, query: str, where: Any, limit: int, *, selective: bool, columns: Any = (),
                       kept: Any = None) -> Any:
        return own(conn, query, where, limit, selective=selective, kept=kept)

    return _replaced(searcher._dialect, memory_hits=ids_and_scores)


def arms(change: str, searcher: Searcher, args: argparse.Namespace
         ) -> dict[str, Callable[[], AbstractContextManager[None]]]:
    """``now`` and ``undone`` for ``change``."""
    if change == "int8-scan":
        if not native.available():
            raise SystemExit("int8-scan needs the native core: pip install ./native")
        return {"now": lambda: _replaced(native, INT8_FROM_ROWS=args.int8_from_rows),
                "undone": lambda: _replaced(native, INT8_FROM_ROWS=sys.maxsize)}
    if change == "embedding-first":
        return {"now": as_it_is, "undone": lambda: _embedding_after_filter(searcher)}
    if change == "signals-early":
        return {"now": as_it_is, "undone": lambda: _replaced(ranking, prepare=lambda *args, **kwargs: None)}
    if change == "statements-kept":
        return {"now": as_it_is, "undone": _statement_per_read}
    if change == "int8-queries":
        exact = MiniLMEmbedder(threads=1)
        exact.load()
        return {"now": as_it_is, "undone": lambda: _replaced(searcher, _query_embedder=exact)}
    if change == "proximity":
        weights = searcher._weights
        on = weights.model_copy(update={"proximity": weights.proximity or PROXIMITY_ON})
        off = weights.model_copy(update={"proximity": 0.0})
        return {"now": lambda: _replaced(searcher, _weights=on), "undone": lambda: _replaced(searcher, _weights=off)}
    if change == "statements-per-filter":
        return {"now": as_it_is, "undone": lambda: _replaced(searcher, _kept=_Unkept())}
    if change == "rows-with-hits":
        return {"now": as_it_is, "undone": lambda: _hits_without_rows(searcher)}
    if change == "full-statement-kept":
        return {"now": as_it_is, "undone": lambda: _replaced(id_reads, _WHOLE_ROWS=_Forgetful())}
    if change == "first-proposals":
        if args.store != "sqlite":
            raise SystemExit("first-proposals is SQLite's change: use --store sqlite")
        return {"now": as_it_is, "undone": _proposals_four_per_hit}
    if change == "matches-counted":
        if args.store != "sqlite":
            raise SystemExit("matches-counted is SQLite's change: use --store sqlite")
        return {"now": as_it_is, "undone": _matches_uncounted}
    if change in ("ids-drive", "window-drive", "broad-filter"):
        if args.store != "sqlite":
            raise SystemExit(f"{change} is SQLite's change: use --store sqlite")
        undo = {"ids-drive": lambda: _replaced(SqliteDialect, by_ids=Dialect.by_ids),
                "window-drive": _type_drives_windows,
                "broad-filter": lambda: _replaced(searcher, _selective=narrows)}[change]
        return {"now": as_it_is, "undone": undo}
    if args.store != "postgres":
        raise SystemExit(f"{change} is PostgreSQL's change: use --store postgres")
    if change == "unlisted-counted":
        return {"now": as_it_is, "undone": lambda: _unlisted_as_rare(searcher)}
    if change == "lexemes-kept":
        return {"now": as_it_is, "undone": lambda: _replaced(pg_fulltext, tsqueries=pg_selection_sql.tsqueries)}
    return {"now": as_it_is, "undone": lambda: _vectors_apart(searcher)}


def session_hits(url: str, work: Path, args: argparse.Namespace, embedder: Any) -> list[dict[str, Any]]:
    """Per arm, LongMemEval_S's session hit rate at 1, 5 and 10 on this store, over the first ``args.queries``
    questions whose answer sessions the store holds (turns carry their session as ``conversation_id``)."""
    searcher = live_searcher(url, work, embedder)
    try:
        with searcher.conn.begin():
            held = set(searcher.conn.execute(select(m.c.conversation_id).distinct()).scalars())
        questions = [q for h in load_longmemeval(args.data, "s") for q in h.questions if q.gold_sessions & held]
        questions = questions[:args.queries]
        rows = []
        for name, arm in arms(args.change, searcher, args).items():
            hits = dict.fromkeys((1, 5, 10), 0)
            with arm():
                for q in questions:
                    with searcher.conn.begin():
                        found = searcher.search(SearchMemories(query=q.text, k=10, filter=MemoryFilter()))
                    sessions = [item.conversation_id for item in found.items]
                    for k in hits:
                        hits[k] += any(s in q.gold_sessions for s in sessions[:k])
            rows.append({"arm": name, "questions": len(questions),
                         **{f"shr_at_{k}": round(n / max(1, len(questions)), 3) for k, n in hits.items()}})
        return rows
    finally:
        searcher.release()


def measure(url: str, work: Path, args: argparse.Namespace) -> list[dict[str, Any]]:
    _, queries = corpus(args.data, 1, args.queries + WARMUP)
    embedder = PrecomputedEmbedder(cached_embedder(args.cache, 1)) if args.cached else None
    if args.sessions:
        print(rows_text(session_hits(url, work, args, embedder), "LongMemEval_S session hits on this store, per arm"))
    return compare_on(url, work, queries, lambda searcher: arms(args.change, searcher, args), "undone", embedder,
                      MemoryFilter(type=args.type, agent_id=args.agent), change=args.change, store=args.store,
                      type=args.type, agent=args.agent,
                      query="cached" if args.cached else "embedded live")


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    options = parser(__doc__.splitlines()[0])
    options.add_argument("--change", choices=CHANGES, required=True)
    options.add_argument("--cached", action="store_true", help="query vectors from the embedding cache")
    options.add_argument("--type", default=None, help="search with this memory type as filter")
    options.add_argument("--agent", default=None, help="search with this agent as filter")
    options.add_argument("--sessions", action="store_true",
                         help="first, each arm's LongMemEval_S session hit rate over the questions the store holds")
    options.add_argument("--int8-from-rows", type=int, default=native.INT8_FROM_ROWS,
                         help="int8-scan: rows from which the arm 'now' scans the int8 copy")
    args = options.parse_args(argv)
    return on_filled_store(args, args.store, measure,
                           f"search, {args.change} now and undone, {args.store}, "
                           + (f"{args.size} memories" if args.url is None else args.url))


if __name__ == "__main__":
    main()
