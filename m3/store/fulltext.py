"""Keyword retrieval: safe query terms and BM25 candidates; each dialect module has its statements.

User text never reaches a full-text query language directly, and a query never becomes an implicit AND of
every word: on SQLite (FTS5) its word tokens, without stop-words, are quoted and OR-ed, so ``gpt-4o``, ``a/b``,
quotes, ``*`` and ``field:value`` are words, never syntax; PostgreSQL's rules are in docs/postgres.md.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, Float, Integer, Row, Table, TextClause, bindparam, select

from m3.store.dialect import dialect_for
from m3.store.schema import chatlog, memories

_WORD = re.compile(r"\w+", re.UNICODE)
MAX_TERMS = 32

_STOP_WORDS_TEXT = """
a about above after again against all am an and any are as at be because been before being below between both
but by can could did do does doing down during each few for from further had has have having he her here hers
herself him himself his how i if in into is it its itself just me more most my myself no nor not now of off on
once only or other our ours ourselves out over own same she should so some such than that the their theirs
them themselves then there these they this those through to too under until up very was we were what when
where which while who whom why will with would you your yours yourself yourselves s t don doesn didn isn wasn
aren weren let lets us also ever please tell know remember think
"""
STOP_WORDS = frozenset(_STOP_WORDS_TEXT.split())


def query_terms(query: str) -> list[str]:
    """Distinct lower-case word tokens of ``query`` without stop-words, in order.

    When every token is a stop-word the tokens themselves are kept, so that a
    query like "who are you" still searches for something.
    """
    tokens = list(dict.fromkeys(t.lower() for t in _WORD.findall(query)))
    return ([t for t in tokens if t not in STOP_WORDS] or tokens)[:MAX_TERMS]


def fts5_match(terms: list[str]) -> str:
    """An FTS5 MATCH expression OR-ing each term as a quoted string."""
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)


@dataclass(frozen=True)
class KeywordHit:
    id: str
    #: BM25 (ts_rank on PostgreSQL) of the content column, positive, larger is better; 0 for a title-only match.
    bm25: float
    #: The columns the search asked for with its hits, by name (None: only the id and score were asked for).
    row: dict[str, Any] | None = field(default=None, compare=False, hash=False)


def _best(conn: Connection, matches: TextClause, table: Table, columns: Sequence[Any], where: Any, limit: int,
          params: Mapping[str, Any] | None = None, kept: dict[Any, Any] | None = None,
          extra: Sequence[str] = ()) -> list[Row[Any]]:
    """The best ``limit`` rows of ``table`` (``columns``, then ``score`` and the ``extra`` integer columns of
    ``matches``) among ``matches`` (seq, score, run with ``params``) that satisfy ``where``: best score first, then
    newest. ``kept``: where the statement is kept for the next run with this ``where`` (one per ``matches`` and
    ``columns``)."""
    key = (matches, tuple(columns))
    stmt = None if kept is None else kept.get(key)
    if stmt is None:
        k = matches.columns(seq=Integer, score=Float, **dict.fromkeys(extra, Integer)).subquery("k")
        stmt = (select(*columns, k.c.score, *(k.c[name] for name in extra))
                .select_from(k.join(table, table.c.seq == k.c.seq)).where(where)
                .order_by(k.c.score.desc(), table.c.seq.desc()).limit(bindparam(_LIMIT)))
        if kept is not None:
            kept[key] = stmt
    return list(conn.execute(stmt, {**(params or {}), _LIMIT: limit}))


#: The parameter the keyword statements take their limit in.
_LIMIT = "m3_limit"


def ranked(conn: Connection, matches: TextClause, where: Any, limit: int, columns: Sequence[Any] = (), *,
           params: Mapping[str, Any] | None = None, kept: dict[Any, Any] | None = None) -> list[KeywordHit]:
    """The best ``limit`` of ``matches`` (seq, score; run with ``params``) among memories matching ``where``, best
    first, then newest; with ``columns`` (``id`` among them), each hit carries them as its ``row``. ``kept``: where
    the statement is kept for the next search under this ``where``."""
    return _hits(_best(conn, matches, memories, columns or [memories.c.id], where, limit, params, kept), columns)


def ranked_within(conn: Connection, matches: TextClause, where: Any, limit: int, top: int,
                  columns: Sequence[Any] = (), *, params: Mapping[str, Any] | None = None,
                  kept: dict[Any, Any] | None = None) -> list[KeywordHit] | None:
    """:func:`ranked` over ``matches`` that are only the best ``top`` matches and say how many there were (an
    integer column ``matched``, at most ``top``): the hits when they are those of every match (``limit`` of them,
    or fewer because there were fewer than ``top`` matches), else None (rank every match instead)."""
    found = _best(conn, matches, memories, columns or [memories.c.id], where, limit, params, kept, ("matched",))
    if len(found) == limit or (found and found[0][-1] < top):
        return _hits([values[:-1] for values in found], columns)
    return None


def _hits(found: Sequence[Sequence[Any]], columns: Sequence[Any]) -> list[KeywordHit]:
    """Keyword hits from rows of ``columns`` (default: the id alone) and the score."""
    if not columns:
        return [KeywordHit(values[0], max(0.0, float(values[-1]))) for values in found]
    names = [c.name for c in columns]
    hits = []
    # Plain tuples zipped with the names, as m3.store.id_reads reads rows (a RowMapping per row costs more).
    for values in found:
        row = dict(zip(names, values[:-1], strict=True))
        hits.append(KeywordHit(row["id"], max(0.0, float(values[-1])), row))
    return hits


def chat_hits(conn: Connection, query: str, where: Any, limit: int) -> list[tuple[Any, float]]:
    """Chat rows matching ``where`` and any word of ``query`` with their keyword score (positive)."""
    inner = dialect_for(conn).chat_matches(conn, query)
    if inner is None:
        return []
    return [(row, max(0.0, float(row.score))) for row in _best(conn, inner, chatlog, [chatlog], where, limit)]
