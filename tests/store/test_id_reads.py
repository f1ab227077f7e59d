"""Memory rows read by id under a filter, on both stores."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import Engine, select

from m3.protocols.messages.memory import MemoryFilter, NewMemory
from m3.store import id_reads
from m3.store import memories as rows
from m3.store.filters import search_clause
from m3.store.schema import memories as m

NOW = datetime(2026, 1, 1, tzinfo=UTC)
IDS = [f"00000000-0000-4000-8000-{i:012d}" for i in range(4)]


def test_rows_by_ids_give_each_asked_row_once_and_only_those_the_filter_admits(writer_engine: Engine) -> None:
    kinds = [("note", "a"), ("note", "b"), ("decision", "a"), ("note", "a")]
    with writer_engine.begin() as conn:
        rows.insert_memories(conn, [
            rows.memory_values(NewMemory(type=kind, content=f"text {i}", agent_id=agent), memory_id=IDS[i],
                               digest=rows.content_hash(f"text {i}"), now=NOW)
            for i, (kind, agent) in enumerate(kinds)])
        clause = search_clause(MemoryFilter(type="note", agent_id="a"), datetime.now(UTC))
        # Asked twice, asked and filtered out, never stored: each admitted row comes back once.
        asked = [IDS[0], IDS[1], IDS[0], IDS[2], "no-such-memory", IDS[3]]
        found = id_reads.rows_by_ids(conn, asked, clause)
        assert sorted(found) == [IDS[0], IDS[3]]
        assert found[IDS[0]]["content"] == "text 0" and found[IDS[3]]["agent_id"] == "a"
        assert rows.visible_ids(conn, asked, clause) == {IDS[0], IDS[3]}
        assert sorted(id_reads.rows_by_ids(conn, asked)) == IDS
        assert id_reads.rows_by_ids(conn, [], clause) == {} and rows.visible_ids(conn, [], clause) == set()


def test_one_id_reader_reads_every_list_it_is_given_under_its_filter_and_chunks_long_ones(
        writer_engine: Engine) -> None:
    many = [f"00000000-0000-4000-9000-{i:012d}" for i in range(rows.CHUNK + 20)]
    with writer_engine.begin() as conn:
        rows.insert_memories(conn, [
            rows.memory_values(NewMemory(type="note" if i % 3 else "decision", content=f"row {i}"), memory_id=m,
                               digest=rows.content_hash(f"row {i}"), now=NOW)
            for i, m in enumerate(many)])
        notes = {m for i, m in enumerate(many) if i % 3}
        read = id_reads.IdReader(conn, search_clause(MemoryFilter(type="note"), datetime.now(UTC)),
                                 columns=id_reads.RANKING_COLUMNS)
        assert set(read(many[:10])) == notes & set(many[:10])
        assert set(read(many[10:40])) == notes & set(many[10:40])
        everything = read(many)  # more ids than one statement takes: run once per chunk
        assert set(everything) == notes and set(everything[many[1]]) == {c.name for c in id_reads.RANKING_COLUMNS}
        assert read([]) == {}


def test_readers_of_whole_rows_share_one_statement_and_read_what_a_plain_select_reads(writer_engine: Engine) -> None:
    with writer_engine.begin() as conn:
        rows.insert_memories(conn, [
            rows.memory_values(NewMemory(type="note", content=f"whole {i}", metadata={"i": i}), memory_id=IDS[i],
                               digest=rows.content_hash(f"whole {i}"), now=NOW)
            for i in range(3)])
        first, second = id_reads.IdReader(conn), id_reads.IdReader(conn)
        assert first._statement is second._statement
        plain = {r["id"]: dict(r) for r in conn.execute(select(m).where(m.c.id.in_(IDS[:2]))).mappings()}
        assert first(IDS[:2]) == plain and second([IDS[2], "no-such-memory"]).keys() == {IDS[2]}
        # A filter or a choice of columns gets a statement of its own.
        assert id_reads.IdReader(conn, m.c.type == "note")._statement is not first._statement
