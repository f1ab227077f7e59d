"""Candidate rows of a search: ranking columns first, the rest loaded once, when first needed."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import numpy as np
import pytest
from sqlalchemy import Connection, event, true

from m3.actors.supervisor import ActorHandle
from m3.protocols.messages.memory import DeleteMemory, MemoryFilter
from m3.retrieval.candidate_rows import ALL_COLUMNS, CandidateRows
from m3.store import memories as rows
from m3.store import vectors
from m3.store.engine import StoreOptions, open_engine
from m3.store.filters import search_clause
from tests.actors.conftest import WAIT_S, write_one


@pytest.fixture
def written(start_writer: Callable[..., ActorHandle]) -> list[str]:
    """Four current memories; a fifth, deleted (retired), is last."""
    writer = start_writer()
    ids = [writer.ask(write_one(f"memory number {i}", title=f"title {i}", metadata={"i": i}), WAIT_S)[0].id
           for i in range(5)]
    writer.ask(DeleteMemory(id=ids[-1]), WAIT_S)
    return ids


@pytest.fixture
def reader(store_options: StoreOptions) -> Iterator[tuple[Connection, list[str]]]:
    """A read connection and the SQL statements it runs."""
    engine = open_engine(store_options, "reader")
    statements: list[str] = []
    event.listen(engine, "before_cursor_execute",
                 lambda *args: statements.append(args[2]) if args[2].startswith("SELECT") else None)
    with engine.connect() as conn, conn.begin():
        yield conn, statements
    engine.dispose()


def test_candidates_are_loaded_without_their_content_and_filtered_like_the_search(
        written: list[str], reader: tuple[Connection, list[str]]) -> None:
    conn, statements = reader
    loaded = CandidateRows(conn, search_clause(MemoryFilter(), datetime.now(UTC)))
    found = loaded.fetch([*written, "no-such-id"])
    assert set(found) == set(written[:4])
    row = found[written[0]]
    assert row["title"] == "title 0" and row["importance"] == 0.5 and row["valid_from"].tzinfo is not None
    assert len(statements) == 1 and "content," not in statements[0].replace("content_hash", "")


def test_reading_a_large_column_loads_it_for_every_candidate_in_one_query(
        written: list[str], reader: tuple[Connection, list[str]]) -> None:
    conn, statements = reader
    found = CandidateRows(conn, true()).fetch(written)
    before = len(statements)
    assert found[written[2]]["content"] == "memory number 2"
    assert [found[i]["metadata"] for i in written] == [{"i": i} for i in range(5)]
    assert len(statements) == before + 1
    assert dict(found[written[1]]) == dict(rows.load(conn, written[1]))
    assert set(found[written[3]]) == ALL_COLUMNS


def test_completing_the_chosen_rows_loads_only_those(
        written: list[str], reader: tuple[Connection, list[str]]) -> None:
    conn, statements = reader
    loaded = CandidateRows(conn, true())
    found = loaded.fetch(written)
    loaded.complete(written[:2])
    assert all(found[i].complete for i in written[:2]) and not any(found[i].complete for i in written[2:])
    before = len(statements)
    loaded.complete(written[:2])
    assert found[written[0]]["content"] == "memory number 0"
    assert len(statements) == before
    with pytest.raises(KeyError):
        found[written[0]]["no_such_column"]


def test_a_row_is_read_once_however_often_it_is_asked_for_and_the_filter_check_keeps_it(
        written: list[str], reader: tuple[Connection, list[str]]) -> None:
    # The Searcher loads the keyword matches first; the dense leg's filter check then reads only the new ids.
    conn, statements = reader
    loaded = CandidateRows(conn, search_clause(MemoryFilter(), datetime.now(UTC)))
    first = loaded.fetch(written[:2])
    assert loaded.passing([written[1], written[2], written[4], "no-such-id"]) == {written[1], written[2]}
    assert len(statements) == 2
    again = loaded.fetch(list(reversed(written)))
    assert list(again) == [written[3], written[2], written[1], written[0]]
    assert again[written[0]] is first[written[0]]
    assert len(statements) == 3
    assert loaded.fetch(written[:3]) and len(statements) == 3


def test_vectors_are_read_once_per_id_in_one_statement_for_the_search_model_only(
        written: list[str], store_options: StoreOptions, reader: tuple[Connection, list[str]]) -> None:
    # Where the dense leg keeps no vectors (PostgreSQL), the keyword matches' vectors are read while the query embeds.
    engine = open_engine(store_options, "writer")
    mine = np.arange(12, dtype=np.float32).reshape(3, 4) / 10
    with engine.begin() as conn:
        vectors.store(conn, "model-a", 4, written[:3], mine, datetime.now(UTC), existing=dict.fromkeys(written, False))
        vectors.store(conn, "model-b", 4, written[1:2], np.ones((1, 4), np.float32), datetime.now(UTC),
                      existing=dict.fromkeys(written, False))
    engine.dispose()
    conn, statements = reader
    loaded = CandidateRows(conn, search_clause(MemoryFilter(), datetime.now(UTC)), vector_model="model-a")
    loaded.read_vectors([*written[1:], written[1]])
    assert len(statements) == 1 and set(loaded.vectors) == set(written[1:3])  # the 4th has no vector yet
    assert loaded.read_with_vectors == set(written[1:])
    for i, memory_id in enumerate(written[1:3], 1):
        np.testing.assert_array_equal(loaded.vectors[memory_id], mine[i])
        assert loaded.vectors[memory_id].dtype == np.float32
    loaded.read_vectors(written[1:3])  # read once: nothing more
    assert len(statements) == 1
    loaded.read_vectors(written[:2])
    assert len(statements) == 2 and set(loaded.vectors) == set(written[:3])
    plain = CandidateRows(conn, true())
    plain.read_vectors(written)  # no model: nothing to read
    assert len(statements) == 2 and plain.vectors == {} and plain.read_with_vectors == set()


def test_rows_adopted_from_the_keyword_statement_are_not_read_again_and_complete_like_the_others(
        written: list[str], reader: tuple[Connection, list[str]]) -> None:
    conn, statements = reader
    clause = search_clause(MemoryFilter(), datetime.now(UTC))
    narrow = rows.rows_by_ids(conn, written[:2], clause, columns=rows.RANKING_COLUMNS)
    before = len(statements)
    loaded = CandidateRows(conn, clause)
    loaded.adopt(narrow)
    found = loaded.fetch(written)
    assert len(statements) == before + 1  # the other rows only
    assert set(found) == set(written[:4]) and dict(found[written[0]]) == dict(rows.load(conn, written[0]))
    assert found[written[1]]["content"] == "memory number 1" and set(found[written[1]]) == ALL_COLUMNS
