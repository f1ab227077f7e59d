"""PostgreSQL's keyword leg: the tsquery built from user text, and which of its lexemes select the rows to rank.

User text goes through the documents' own parser (``to_tsvector('english', ...)``) and each lexeme is quoted,
so no text is ever tsquery syntax. A match is an OR of lexemes, as on SQLite.

**The rows ranked are chosen by the rarer lexemes.** ``ts_rank`` reads every matched row's tsvector (most are
TOASTed), so its cost grows with the matches: a query word found in a third of the store (LongMemEval's
"help", "like", "make") cost a pass over a third of the store. The lexemes that select the rows to rank are
therefore taken rarest first, by the frequencies ``ANALYZE`` keeps for the column (``pg_stats``), while their
estimated matches add up to at most :data:`MATCH_BUDGET` rows; the rarest is always kept. The rows chosen are
ranked by every lexeme of the query, so a chosen row scores exactly as before. A lexeme ANALYZE did not list is
counted through the index, up to the budget (:func:`_count_unlisted`); a table never analyzed has no frequencies,
and every lexeme selects, as before this rule (docs/postgres.md).

**A connection keeps what the rule reads** (:func:`_kept`): the table's frequencies until ANALYZE or VACUUM has
run (its row estimate or analysis time changed) or :data:`KEPT_S` has passed, and the counts of unlisted lexemes
as long as the frequencies they go with. Read on every search, they cost about 2 ms of the server's time at 100k
memories; a count is at most a minute old, and frequencies are as old as the last ANALYZE in either case.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
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


#: The query's lexemes (the first MAX_TERMS by position, then text) and what says whether the statistics a
#: connection keeps for ``:table`` are still current (its row estimate, when it was last analyzed, and which
#: table it is: one dropped and made again has another oid).
_LEXEMES = f"""
    SELECT ARRAY(
        SELECT t.lexeme FROM unnest(to_tsvector('english', CAST(:text AS text))) AS t
        ORDER BY t.positions[1], t.lexeme LIMIT {MAX_TERMS}
    ), (SELECT greatest(c.reltuples, 0) FROM pg_class AS c WHERE c.oid = to_regclass(:table)),
    pg_stat_get_last_analyze_time(to_regclass(:table)), pg_stat_get_last_autoanalyze_time(to_regclass(:table)),
    CAST(to_regclass(:table) AS oid)
"""
#: The lexeme frequencies ANALYZE keeps for the table's ``fts_content`` (no row: never analyzed).
_FREQUENCIES = """
    SELECT CAST(CAST(p.most_common_elems AS text) AS text[]), p.most_common_elem_freqs FROM pg_stats AS p
    WHERE p.schemaname = current_schema() AND p.tablename = :table AND p.attname = 'fts_content'
"""
#: The first part of the key in ``Connection.info`` under which a connection keeps a table's statistics.
KEPT_KEY = "m3.lexeme_statistics"
#: Longest a connection uses the statistics and counts it keeps before it reads them again (seconds).
KEPT_S = 60.0
#: Seconds from any fixed point: when statistics and counts were read (tests move it).
clock = time.monotonic


@dataclass
class _Kept:
    """What one connection knows of one table's lexemes: the statistics of its last ANALYZE, and the matches of
    lexemes they do not list, counted up to the budget since (all of it read again after :data:`KEPT_S`)."""

    fingerprint: tuple[Any, ...]
    read_at: float
    analyzed: bool
    frequencies: dict[str, np.float32]
    counts: dict[str, int] = field(default_factory=dict)


def _count_unlisted(conn: Connection, table: str, lexemes: list[str]) -> dict[str, int]:
    """The matches of each of ``lexemes`` (ones ``pg_stats`` does not list), counted through the full-text index
    up to ``MATCH_BUDGET + 1``: unlisted means rarer than the least frequent listed lexeme, not rare (at 100k
    LongMemEval turns "mile" held 1,059 rows)."""
    found = conn.execute(text(
        f"SELECT u.lexeme, (SELECT count(*) FROM (SELECT 1 FROM {table} AS c WHERE c.fts_content @@ "
        f"CAST({_quoted('u.lexeme')} AS tsquery) LIMIT {MATCH_BUDGET + 1}) AS x) "
        "FROM unnest(CAST(:lexemes AS text[])) AS u(lexeme)"), {"lexemes": lexemes})
    return {str(lexeme): int(n) for lexeme, n in found}


def _kept(conn: Connection, table: str, fingerprint: tuple[Any, ...]) -> _Kept:
    """This connection's statistics of ``table``, read again when ANALYZE or VACUUM has run since (the fingerprint
    changed) or after :data:`KEPT_S`."""
    key = (KEPT_KEY, table)
    kept: _Kept | None = conn.info.get(key)
    now = clock()
    if kept is None or kept.fingerprint != fingerprint or now - kept.read_at > KEPT_S:
        row = conn.execute(text(_FREQUENCIES), {"table": table}).first()
        elements, freqs = (None, None) if row is None else (row[0], row[1])
        # most_common_elem_freqs ends with three figures of its own beyond one per element (zip stops before).
        frequencies = {str(e): np.float32(f) for e, f in zip(elements or [], freqs or [], strict=False)}
        kept = conn.info[key] = _Kept(fingerprint, now, elements is not None, frequencies)
    return kept


def _estimates(conn: Connection, table: str, lexemes: list[str], rows: np.float32, kept: _Kept) -> list[np.float32]:
    """Each lexeme's estimated matches: its listed frequency times the row estimate, else its count (0 on a table
    never analyzed, where every lexeme selects). In float4, as PostgreSQL computed them when this ran in SQL."""
    if not kept.analyzed:
        return [np.float32(0)] * len(lexemes)
    uncounted = [x for x in dict.fromkeys(lexemes) if x not in kept.frequencies and x not in kept.counts]
    if uncounted:
        kept.counts.update(_count_unlisted(conn, table, uncounted))
    return [kept.frequencies[x] * rows if x in kept.frequencies else np.float32(kept.counts[x]) for x in lexemes]


def _selecting(estimates: list[np.float32]) -> list[int]:
    """Positions (in query order) of the lexemes that select the rows to rank: rarest first while their estimates
    add up to at most the budget, and always the rarest."""
    order = sorted(range(len(estimates)), key=lambda i: (estimates[i], i))
    chosen, running = [], np.float32(0)
    for nth, i in enumerate(order):
        running = np.float32(running + estimates[i])
        if nth == 0 or running <= MATCH_BUDGET:
            chosen.append(i)
    return sorted(chosen)


def _tsquery(lexemes: list[str]) -> str:
    """The OR of ``lexemes``, each quoted (' and \\ doubled), as tsquery text: never an operator."""
    return " | ".join("'" + x.replace("\\", "\\\\").replace("'", "''") + "'" for x in lexemes)


def clean_query(query: str) -> str:
    """The query without what PostgreSQL cannot take (NUL, lone surrogates), capped in length."""
    return query[:MAX_QUERY_CHARS].replace("\x00", " ").encode("utf-8", "replace").decode("utf-8")


def tsqueries(conn: Connection, table: str, query: str) -> tuple[str, str] | None:
    """The whole query's tsquery and the one selecting the rows of ``table`` to rank, as text; None when the
    query has no lexeme.

    Worked out before the ranking statement: inside it, the planner copied the selection into every place that
    reads it and planned it each time (5-7 ms of planning per search at 10k memories). The statistics come from
    what this connection keeps (:func:`_kept`): reading ``pg_stats`` and counting unlisted lexemes on every search
    cost about 2 ms of the server's time at 100k memories.
    """
    found = conn.execute(text(_LEXEMES), {"text": clean_query(query), "table": table}).one()
    lexemes = [str(x) for x in found[0]]
    if not lexemes:
        return None
    kept = _kept(conn, table, tuple(found[1:]))
    chosen = _selecting(_estimates(conn, table, lexemes, np.float32(found[1] or 0), kept))
    return _tsquery(lexemes), _tsquery([lexemes[i] for i in chosen])


def matches(conn: Connection, table: str, matching: str, query: str) -> tuple[TextClause, dict[str, str]] | None:
    """(seq, score) of the rows of ``table`` (as ``t``) where ``matching`` holds for the selecting tsquery ``:msq``,
    scored by ``ts_rank`` against the whole query's ``:tsq``, and the parameters to run it with (the statement
    is one per ``table`` and ``matching``, so a statement built on it can be kept); None when the query has no
    lexeme."""
    found = tsqueries(conn, table, query)
    if found is None:
        return None
    return _matches(table, matching), {"tsq": found[0], "msq": found[1]}


@functools.cache
def _matches(table: str, matching: str) -> TextClause:
    return text(f"SELECT t.seq, ts_rank(t.fts_content, CAST(:tsq AS tsquery), 1) AS score FROM {table} AS t "
                f"WHERE {matching}")
