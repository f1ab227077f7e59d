"""Keyword retrieval: safe query terms and BM25 candidates on each dialect.

User text never reaches the FTS query language directly: it is cut into
word tokens, stop-words are dropped, and each remaining token is quoted and
OR-ed. So ``gpt-4o``, ``a/b``, quotes, ``*`` and ``field:value`` are words,
never syntax, and a query never becomes an implicit AND of every word.
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


def tsquery_text(terms: list[str]) -> str:
    """A to_tsquery input OR-ing the terms; each is a quoted lexeme so no operator can leak in."""
    return " | ".join("'" + t.replace("'", "''").replace("\\", "") + "'" for t in terms)


@dataclass(frozen=True)
class KeywordHit:
    id: str
    #: BM25 of the content column, positive, larger is better; 0 for a title-only match.
    bm25: float


def memory_hits(conn: Connection, terms: list[str], where: Any, limit: int) -> list[KeywordHit]:
    """Current-filtered memories matching any term, best BM25 first."""
    if not terms:
        return []
    if conn.dialect.name == "sqlite":
        inner = text(
            "SELECT rowid AS seq, -bm25(memories_fts, 0.0, 1.0) AS score FROM memories_fts "
            "WHERE memories_fts MATCH :match"
        ).bindparams(match=fts5_match(terms)).columns(seq=Integer, score=Float).subquery("k")
        score = inner.c.score
    else:
        inner = text(
            "SELECT seq, ts_rank_cd(fts_content, q, 1) AS score FROM memories, to_tsquery('english', :tsq) q "
            "WHERE fts_content @@ q OR fts_title @@ q"
        ).bindparams(tsq=tsquery_text(terms)).columns(seq=Integer, score=Float).subquery("k")
        score = inner.c.score
    query = (
        select(memories.c.id, score)
        .select_from(inner.join(memories, memories.c.seq == inner.c.seq))
        .where(where)
        .order_by(score.desc(), memories.c.seq.desc())
        .limit(limit)
    )
    return [KeywordHit(row[0], max(0.0, float(row[1]))) for row in conn.execute(query)]


def chat_hits(conn: Connection, terms: list[str], where: Any, limit: int) -> list[tuple[Any, float]]:
    """Chat rows matching any term with their BM25 (positive, larger is better)."""
    if not terms:
        return []
    if conn.dialect.name == "sqlite":
        inner = text(
            "SELECT rowid AS seq, -bm25(chatlog_fts) AS score FROM chatlog_fts WHERE chatlog_fts MATCH :match"
        ).bindparams(match=fts5_match(terms)).columns(seq=Integer, score=Float).subquery("k")
    else:
        inner = text(
            "SELECT seq, ts_rank_cd(fts_content, q, 1) AS score FROM chatlog, to_tsquery('english', :tsq) q "
            "WHERE fts_content @@ q"
        ).bindparams(tsq=tsquery_text(terms)).columns(seq=Integer, score=Float).subquery("k")
    query = (
        select(chatlog, inner.c.score)
        .select_from(inner.join(chatlog, chatlog.c.seq == inner.c.seq))
        .where(where)
        .order_by(inner.c.score.desc(), chatlog.c.seq.desc())
        .limit(limit)
    )
    return [(row, max(0.0, float(row.score))) for row in conn.execute(query)]
