"""PostgreSQL's keyword leg: the rarer lexemes of a query choose the rows to rank, every lexeme scores them."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from sqlalchemy import Connection, Engine, text, true

from benchmarks import pg_selection_sql
from m3.protocols.messages.memory import NewMemory
from m3.store import memories as rows
from m3.store import pg_fulltext
from m3.store.dialect import dialect_for
from m3.store.engine import StoreOptions, migrate, open_engine
from m3.store.pg_fulltext import MATCH_BUDGET, tsqueries
from tests.stored import is_postgres

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
COMMON = MATCH_BUDGET + 500  # memories about the weather: more than the budget by themselves
BOTH, RARE_ONLY = 5, 3


@pytest.fixture
def common_word(store_url: str) -> Iterator[Engine]:
    """COMMON memories say "weather"; BOTH of them say "volcano" too, and RARE_ONLY others only "volcano".
    Autovacuum is off for the table, so it is analyzed only when a test says so."""
    if not is_postgres(store_url):
        pytest.skip("PostgreSQL only: SQLite's FTS5 reads term frequencies from its own index")
    eng = open_engine(StoreOptions(url=store_url), "writer")
    migrate(eng)
    texts = [f"weather report number {i}" for i in range(COMMON - BOTH)]
    texts += [f"weather and volcano ash number {i}" for i in range(BOTH)]
    texts += [f"volcano eruption number {i}" for i in range(RARE_ONLY)]
    with eng.begin() as conn:
        conn.execute(text("ALTER TABLE memories SET (autovacuum_enabled = false)"))
        rows.insert_memories(conn, [rows.memory_values(NewMemory(type="note", content=t), memory_id=f"m{i:05d}",
                                                       digest=rows.content_hash(t), now=NOW)
                                    for i, t in enumerate(texts)])
    yield eng
    eng.dispose()


def analyze(engine: Engine) -> None:
    with engine.connect() as conn:
        conn.execute(text("ANALYZE memories"))
        conn.commit()


def hits(conn: Connection, query: str, limit: int = 50) -> list[tuple[str, float]]:
    return [(h.id, h.bm25) for h in dialect_for(conn).memory_hits(conn, query, true(), limit, selective=False)]


def test_a_lexeme_in_most_memories_no_longer_chooses_rows_once_the_table_is_analyzed(common_word: Engine) -> None:
    with common_word.connect() as conn:
        assert tsqueries(conn, "memories", "volcano weather") == ("'volcano' | 'weather'", "'volcano' | 'weather'")
        before = hits(conn, "volcano weather")
    assert len(before) == 50
    analyze(common_word)
    with common_word.connect() as conn:
        assert tsqueries(conn, "memories", "volcano weather") == ("'volcano' | 'weather'", "'volcano'")
        after = hits(conn, "volcano weather")
    # Only the memories naming the volcano are ranked, and those naming the weather too still rank first:
    # every lexeme of the query scores a chosen row, exactly as before.
    assert sorted(i for i, _ in after) == sorted(f"m{i:05d}" for i in range(COMMON - BOTH, COMMON + RARE_ONLY))
    assert {i for i, _ in after[:BOTH]} == {f"m{i:05d}" for i in range(COMMON - BOTH, COMMON)}
    assert dict(after) == {i: s for i, s in before if i in dict(after)}


def test_a_query_of_only_common_lexemes_still_searches_for_the_rarest(common_word: Engine) -> None:
    analyze(common_word)
    with common_word.connect() as conn:
        assert tsqueries(conn, "memories", "the weather report") == ("'weather' | 'report'", "'report'")
        assert len(hits(conn, "weather report")) == 50
        assert tsqueries(conn, "memories", "and then,") is None and hits(conn, "and then,") == []


FILLERS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet"


@pytest.fixture
def unlisted_word(store_url: str) -> Iterator[Engine]:
    """2,600 memories: ten filler words in each (the ten lexemes ANALYZE lists at statistics target 1), "zebra"
    in 2,100 of them (common, yet not listed: the list is full) and "volcano" in 8."""
    if not is_postgres(store_url):
        pytest.skip("PostgreSQL only: SQLite's FTS5 reads term frequencies from its own index")
    eng = open_engine(StoreOptions(url=store_url), "writer")
    migrate(eng)
    texts = [f"{FILLERS} zebra" for _ in range(2100)] + [f"{FILLERS} volcano" for _ in range(8)]
    texts += [FILLERS for _ in range(492)]
    with eng.begin() as conn:
        conn.execute(text("ALTER TABLE memories SET (autovacuum_enabled = false)"))
        conn.execute(text("ALTER TABLE memories ALTER COLUMN fts_content SET STATISTICS 1"))
        rows.insert_memories(conn, [rows.memory_values(NewMemory(type="note", content=t), memory_id=f"u{i:05d}",
                                                       digest=rows.content_hash(f"{t} {i}"), now=NOW)
                                    for i, t in enumerate(texts)])
    analyze(eng)
    yield eng
    eng.dispose()


def test_a_common_lexeme_the_statistics_do_not_list_is_counted_not_taken_for_rare(unlisted_word: Engine) -> None:
    with unlisted_word.connect() as conn:
        listed = conn.execute(text(
            "SELECT CAST(most_common_elems AS text) FROM pg_stats WHERE tablename = 'memories' "
            "AND attname = 'fts_content'")).scalar_one()
        assert "zebra" not in listed and "volcano" not in listed  # the premise: neither is listed
        # Zebra's 2,100 rows (counted up to the budget) do not fit beside volcano's 8: only volcano selects.
        assert tsqueries(conn, "memories", "volcano zebra") == ("'volcano' | 'zebra'", "'volcano'")
        assert tsqueries(conn, "memories", "zebra") == ("'zebra'", "'zebra'")  # the rarest is always kept
        assert len(hits(conn, "volcano zebra")) == 8


#: Words of the stores above, common and rare, listed by ANALYZE or not, absent, stop words, and text that would
#: be tsquery syntax if it were not quoted.
WORDS = ("volcano", "weather", "report", "zebra", "alpha", "eruption", "ash", "number", "the", "unheard",
         "o'brien", "back\\slash", "a:b", "x&y|!z")


def same_as_the_rule_in_sql(engine: Engine) -> None:
    queries = [f"{a} {b} {c}" for a in WORDS for b in WORDS for c in WORDS[::3]] + ["", "and then,"]
    with engine.connect() as conn:
        for query in queries:
            assert tsqueries(conn, "memories", query) == pg_selection_sql.tsqueries(conn, "memories", query), query


def test_the_selection_equals_the_rule_worked_out_in_sql_on_every_call(common_word: Engine) -> None:
    same_as_the_rule_in_sql(common_word)  # not analyzed: every lexeme selects
    analyze(common_word)
    same_as_the_rule_in_sql(common_word)


def test_the_selection_equals_the_rule_in_sql_where_counts_decide(unlisted_word: Engine) -> None:
    same_as_the_rule_in_sql(unlisted_word)


def test_a_connection_reads_the_statistics_again_once_the_table_is_analyzed(common_word: Engine) -> None:
    with common_word.connect() as conn:
        assert tsqueries(conn, "memories", "volcano weather")[1] == "'volcano' | 'weather'"
        conn.rollback()
        analyze(common_word)
        assert tsqueries(conn, "memories", "volcano weather")[1] == "'volcano'"


def test_a_connection_counts_an_unlisted_lexeme_again_after_a_minute(
        unlisted_word: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1000.0]
    monkeypatch.setattr(pg_fulltext, "clock", lambda: now[0])
    with unlisted_word.connect() as conn:
        assert tsqueries(conn, "memories", "volcano zebra")[1] == "'volcano'"  # zebra: 2,100 rows
        conn.rollback()
        with unlisted_word.begin() as other:  # zebra becomes rare; no ANALYZE, so the statistics stay the same
            other.execute(text("DELETE FROM memories WHERE seq IN (SELECT seq FROM memories "
                               "WHERE content LIKE '%zebra%' LIMIT 2000)"))
        now[0] += pg_fulltext.KEPT_S - 1
        assert tsqueries(conn, "memories", "volcano zebra")[1] == "'volcano'"  # the count kept
        now[0] += 2
        assert tsqueries(conn, "memories", "volcano zebra")[1] == "'volcano' | 'zebra'"  # 8 + 100 rows fit
