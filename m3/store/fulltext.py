"""Keyword retrieval: safe query terms and BM25 candidates on each dialect.

User text never reaches a full-text query language directly, and a query
never becomes an implicit AND of every word:

* SQLite (FTS5): the text is cut into word tokens, stop-words are dropped,
  and each remaining token is quoted and OR-ed. So ``gpt-4o``, ``a/b``,
  quotes, ``*`` and ``field:value`` are words, never syntax.
* PostgreSQL: the text goes through the same ``to_tsvector('english', …)``
  as the documents, so it is cut, stemmed and stripped of stop-words exactly
  like them (``gpt-4o`` gives ``gpt-4o | gpt | 4o``; a file name, host or
  version stays one token, as in the documents). Each lexeme is quoted and
  the OR of them is cast to ``tsquery``, which cannot fail to parse; a text
  without lexemes matches nothing. The score is ``ts_rank`` divided by
  1 + log(document length) (flag 1): more occurrences, more distinct query
  words and a shorter document each score higher, as with BM25.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Float, Integer, select, text

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
    tokens = [t.lower() for t in _WORD.findall(query)]
    seen: dict[str, None] = {}
    for token in tokens:
        if token not in STOP_WORDS:
            seen.setdefault(token, None)
    if not seen:
        for token in tokens:
            seen.setdefault(token, None)
    return list(seen)[:MAX_TERMS]


def fts5_match(terms: list[str]) -> str:
    """An FTS5 MATCH expression OR-ing each term as a quoted string."""
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)


#: Longest query text handed to PostgreSQL's parser.
MAX_QUERY_CHARS = 10_000

# The OR of the query's lexemes (the first MAX_TERMS by position), each quoted with ' and \ doubled so
# that the cast never meets an operator; NULL when the text has no lexeme: no rows, and no NOTICE.
_OR_TSQUERY = rf"""
    NULLIF(array_to_string(ARRAY(
        SELECT '''' || replace(replace(t.lexeme, '\', '\\'), '''', '''''') || ''''
        FROM unnest(to_tsvector('english', CAST(:text AS text))) AS t
        ORDER BY t.positions[1], t.lexeme LIMIT {MAX_TERMS}
    ), ' | '), '')::tsquery
"""


def clean_query(query: str) -> str:
    """The query without what PostgreSQL cannot take (NUL, lone surrogates), capped in length."""
    return query[:MAX_QUERY_CHARS].replace("\x00", " ").encode("utf-8", "replace").decode("utf-8")


def pg_tsquery(conn: Connection, query: str) -> str | None:
    """The tsquery a PostgreSQL store searches for ``query``, as text; None when it has no lexeme."""
    found = conn.execute(text(f"SELECT CAST(({_OR_TSQUERY}) AS text)"), {"text": clean_query(query)}).scalar()
    return None if found is None else str(found)


@dataclass(frozen=True)
class KeywordHit:
    id: str
    #: BM25 (ts_rank on PostgreSQL) of the content column, positive, larger is better; 0 for a title-only match.
    bm25: float


#: Unfiltered SQLite searches check the filters on FTS5's best ``PREFILTER_FACTOR * limit`` matches first.
PREFILTER_FACTOR = 4

_FTS5_SCORE = "bm25(memories_fts, 0.0, 1.0)"  # title weight 0: the title is searched, not scored


def memory_hits(conn: Connection, query: str, where: Any, limit: int, *, selective: bool = False
                ) -> list[KeywordHit]:
    """Memories matching ``where`` and any word of ``query``: best keyword score first, then newest.

    On SQLite, unless ``selective``, only FTS5's best ``PREFILTER_FACTOR * limit``
    matches are joined to ``memories`` and filtered first; if fewer than
    ``limit`` of them pass, every match is. Both give the same list (the best
    matches that pass are among the best matches, ordered the same way), but
    the first saves a row lookup per further match, which on a large store is
    most of the keyword leg. ``selective`` says the filter will likely drop
    most matches (one conversation, one type, one agent), so the first try
    would mostly be wasted.
    """
    if conn.dialect.name != "sqlite":
        return _ranked(conn, _tsquery_matches(query), where, limit)
    terms = query_terms(query)
    if not terms:
        return []
    match = fts5_match(terms)
    if not selective:
        hits = _ranked(conn, _fts5_matches(match, top=PREFILTER_FACTOR * limit), where, limit)
        if len(hits) == limit:
            return hits
    return _ranked(conn, _fts5_matches(match), where, limit)


def _fts5_matches(match: str, top: int | None = None) -> Any:
    """(seq, score) of FTS5 matches; with ``top``, only the best ``top`` in the final order."""
    sql = f"SELECT rowid AS seq, -{_FTS5_SCORE} AS score FROM memories_fts WHERE memories_fts MATCH :match"
    if top is None:
        return text(sql).bindparams(match=match)
    return text(f"{sql} ORDER BY {_FTS5_SCORE}, rowid DESC LIMIT :top").bindparams(match=match, top=top)


def _tsquery_matches(query: str) -> Any:
    """(seq, score) of tsvector matches; the title is searched but not scored, as on SQLite."""
    return text(
        "SELECT m.seq, ts_rank(m.fts_content, q.tsq, 1) AS score "
        f"FROM memories AS m, (SELECT {_OR_TSQUERY} AS tsq) AS q "
        "WHERE q.tsq IS NOT NULL AND (m.fts_content @@ q.tsq OR m.fts_title @@ q.tsq)"
    ).bindparams(text=clean_query(query))


def _ranked(conn: Connection, matches: Any, where: Any, limit: int) -> list[KeywordHit]:
    k = matches.columns(seq=Integer, score=Float).subquery("k")
    stmt = (
        select(memories.c.id, k.c.score)
        .select_from(k.join(memories, memories.c.seq == k.c.seq))
        .where(where)
        .order_by(k.c.score.desc(), memories.c.seq.desc())
        .limit(limit)
    )
    return [KeywordHit(row[0], max(0.0, float(row[1]))) for row in conn.execute(stmt)]


def chat_hits(conn: Connection, query: str, where: Any, limit: int) -> list[tuple[Any, float]]:
    """Chat rows matching ``where`` and any word of ``query`` with their keyword score (positive)."""
    if conn.dialect.name == "sqlite":
        terms = query_terms(query)
        if not terms:
            return []
        inner = text(
            "SELECT rowid AS seq, -bm25(chatlog_fts) AS score FROM chatlog_fts WHERE chatlog_fts MATCH :match"
        ).bindparams(match=fts5_match(terms))
    else:
        inner = text(
            "SELECT c.seq, ts_rank(c.fts_content, q.tsq, 1) AS score "
            f"FROM chatlog AS c, (SELECT {_OR_TSQUERY} AS tsq) AS q "
            "WHERE q.tsq IS NOT NULL AND c.fts_content @@ q.tsq"
        ).bindparams(text=clean_query(query))
    k = inner.columns(seq=Integer, score=Float).subquery("k")
    stmt = (
        select(chatlog, k.c.score)
        .select_from(k.join(chatlog, chatlog.c.seq == k.c.seq))
        .where(where)
        .order_by(k.c.score.desc(), chatlog.c.seq.desc())
        .limit(limit)
    )
    return [(row, max(0.0, float(row.score))) for row in conn.execute(stmt)]
