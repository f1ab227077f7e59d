"""The keyword leg's lexeme selection on PostgreSQL as it ran until 2026-12-05: in one SQL statement per search.

:func:`m3.store.pg_fulltext.tsqueries` applies the same rule in Python, with the statistics its connection keeps
(docs/postgres.md). This statement reads ``pg_stats`` and counts the unlisted lexemes on every call; it is the
``undone`` arm of ``search_undo --change lexemes-kept`` and the reference the equality test compares with.
"""

from __future__ import annotations

from sqlalchemy import Connection, text

from m3.store.fulltext import MAX_TERMS
from m3.store.pg_fulltext import MATCH_BUDGET, OR_TSQUERY, clean_query
from m3.store.pg_fulltext import _quoted as quoted


def _unlisted(table: str) -> str:
    analyzed = f"""
        SELECT 1 FROM pg_stats AS p WHERE p.schemaname = current_schema() AND p.tablename = '{table}'
        AND p.attname = 'fts_content' AND p.most_common_elems IS NOT NULL"""
    return (f"CASE WHEN EXISTS ({analyzed}) THEN (SELECT count(*) FROM (SELECT 1 FROM {table} AS c "
            f"WHERE c.fts_content @@ CAST({quoted('t.lexeme')} AS tsquery) LIMIT {MATCH_BUDGET + 1}) AS x) ELSE 0 END")


def _selecting(table: str) -> str:
    frequencies = f"""
        SELECT e.lexeme, e.freq FROM pg_stats AS p,
            unnest(CAST(CAST(p.most_common_elems AS text) AS text[]), p.most_common_elem_freqs) AS e(lexeme, freq)
        WHERE p.schemaname = current_schema() AND p.tablename = '{table}' AND p.attname = 'fts_content'"""
    rows = f"SELECT greatest(c.reltuples, 0) FROM pg_class AS c WHERE c.oid = to_regclass('{table}')"
    return rf"""
    NULLIF(array_to_string(ARRAY(
        SELECT {quoted("w.lexeme")} FROM (
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


def tsqueries(conn: Connection, table: str, query: str) -> tuple[str, str] | None:
    """What :func:`m3.store.pg_fulltext.tsqueries` returns, worked out in one statement from the statistics as
    they are now."""
    found = conn.execute(text(f"SELECT CAST(({OR_TSQUERY}) AS text), CAST(({_selecting(table)}) AS text)"),
                         {"text": clean_query(query)}).one()
    return None if found[0] is None else (str(found[0]), str(found[1]))
