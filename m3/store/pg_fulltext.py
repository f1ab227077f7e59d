"""PostgreSQL's keyword leg: the tsquery built from user text, and which of its lexemes select the rows to rank.

User text goes through the documents' own parser (``to_tsvector('english', ...)``) and each lexeme is quoted,
so no text is ever tsquery syntax. A match is an OR of lexemes, as on SQLite.

**The rows ranked are chosen by the rarer lexemes.** ``ts_rank`` reads every matched row's tsvector (most are
TOASTed), so its cost grows with the matches: a query word found in a third of the store (LongMemEval's
"help", "like", "make") cost a pass over a third of the store. The lexemes that select the rows to rank are
therefore taken rarest first, by the frequencies ``ANALYZE`` keeps for the column (``pg_stats``), while their
estimated matches add up to at most :data:`MATCH_BUDGET` rows; the rarest is always kept. The rows chosen are
ranked by every lexeme of the query, so a chosen row scores exactly as before. A lexeme ANALYZE did not list is
counted through the index, up to the budget (:func:`_unlisted`); a table never analyzed has no frequencies, and
every lexeme selects, as before this rule (docs/postgres.md).
"""

from __future__ import annotations

from sqlalchemy import Connection, text
from sqlalchemy.sql.elements import TextClause

from m3.store.fulltext import MAX_TERMS

#: Longest query text handed to PostgreSQL's parser.
MAX_QUERY_CHARS = 10_000
#: Most matches (estimated from pg_stats) the lexemes selecting the rows to rank may have together.
MATCH_BUDGET = 2000


def _quoted(column: str) -> str:
    """SQL quoting ``column`` as a tsquery string literal: ' and \\ doubled, so the cast never meets an operator."""
    return rf"'''' || replace(replace({column}, '\', '\\'), '''', '''''') || ''''"


# The OR of the query's lexemes (the first MAX_TERMS by position); NULL when the text has no lexeme: no rows,
# and no NOTICE.
OR_TSQUERY = rf"""
    NULLIF(array_to_string(ARRAY(
        SELECT {_quoted("t.lexeme")}
        FROM unnest(to_tsvector('english', CAST(:text AS text))) AS t
        ORDER BY t.positions[1], t.lexeme LIMIT {MAX_TERMS}
    ), ' | '), '')::tsquery
"""


def _unlisted(table: str) -> str:
    """SQL: the matches of ``t.lexeme``, a lexeme ``pg_stats`` does not list, counted through the full-text index
    up to ``MATCH_BUDGET + 1`` (unlisted means rarer than the least frequent listed lexeme, not rare: at 100k
    LongMemEval turns "mile" held 1,059 rows); 0 on a table never analyzed, where every lexeme selects."""
    analyzed = f"""
        SELECT 1 FROM pg_stats AS p WHERE p.schemaname = current_schema() AND p.tablename = '{table}'
        AND p.attname = 'fts_content' AND p.most_common_elems IS NOT NULL"""
    return (f"CASE WHEN EXISTS ({analyzed}) THEN (SELECT count(*) FROM (SELECT 1 FROM {table} AS c "
            f"WHERE c.fts_content @@ CAST({_quoted('t.lexeme')} AS tsquery) LIMIT {MATCH_BUDGET + 1}) AS x) ELSE 0 END")


def _selecting(table: str) -> str:
    """The OR of the lexemes of the query that select the rows of ``table`` to rank (see the module's text)."""
    frequencies = f"""
        SELECT e.lexeme, e.freq FROM pg_stats AS p,
            unnest(CAST(CAST(p.most_common_elems AS text) AS text[]), p.most_common_elem_freqs) AS e(lexeme, freq)
        WHERE p.schemaname = current_schema() AND p.tablename = '{table}' AND p.attname = 'fts_content'"""
    rows = f"SELECT greatest(c.reltuples, 0) FROM pg_class AS c WHERE c.oid = to_regclass('{table}')"
    return rf"""
    NULLIF(array_to_string(ARRAY(
        SELECT {_quoted("w.lexeme")} FROM (
            SELECT l.lexeme, l.pos, row_number() OVER (ORDER BY l.est, l.pos, l.lexeme) AS nth,
                   sum(l.est) OVER (ORDER BY l.est, l.pos, l.lexeme) AS running
            FROM (
                SELECT t.lexeme, t.positions[1] AS pos, coalesce(s.freq * ({rows}), {_unlisted(table)}) AS est
                FROM unnest(to_tsvector('english', CAST(:text AS text))) AS t
                LEFT JOIN ({frequencies}) AS s ON s.lexeme = t.lexeme
                ORDER BY t.positions[1], t.lexeme LIMIT {MAX_TERMS}
            ) AS l
        ) AS w
        WHERE w.nth = 1 OR w.running <= {MATCH_BUDGET}
        ORDER BY w.pos, w.lexeme
    ), ' | '), '')::tsquery
"""


def clean_query(query: str) -> str:
    """The query without what PostgreSQL cannot take (NUL, lone surrogates), capped in length."""
    return query[:MAX_QUERY_CHARS].replace("\x00", " ").encode("utf-8", "replace").decode("utf-8")


def tsqueries(conn: Connection, table: str, query: str) -> tuple[str, str] | None:
    """The whole query's tsquery and the one selecting the rows of ``table`` to rank, as text; None when the
    query has no lexeme.

    Worked out in a statement of their own: inside the ranking statement the planner copied the selection into
    every place that reads it and planned it each time (5-7 ms of planning per search at 10k memories).
    """
    found = conn.execute(text(f"SELECT CAST(({OR_TSQUERY}) AS text), CAST(({_selecting(table)}) AS text)"),
                         {"text": clean_query(query)}).one()
    return None if found[0] is None else (str(found[0]), str(found[1]))


def matches(conn: Connection, table: str, matching: str, query: str) -> TextClause | None:
    """(seq, score) of the rows of ``table`` (as ``t``) where ``matching`` holds for the selecting tsquery ``:msq``,
    scored by ``ts_rank`` against the whole query's ``:tsq``; None when the query has no lexeme."""
    found = tsqueries(conn, table, query)
    if found is None:
        return None
    return text(f"SELECT t.seq, ts_rank(t.fts_content, CAST(:tsq AS tsquery), 1) AS score FROM {table} AS t "
                f"WHERE {matching}").bindparams(tsq=found[0], msq=found[1])
