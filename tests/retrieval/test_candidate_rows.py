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


def test_rows_read_with_vectors_bring_the_search_models_vector_in_the_same_statement_and_later_rows_do_not(
        written: list[str], store_options: StoreOptions, reader: tuple[Connection, list[str]]) -> None:
    # Where the dense leg keeps no vectors (PostgreSQL), the keyword matches' vectors come with their rows.
    engine = open_engine(store_options, "writer")
    mine = np.arange(12, dtype=np.float32).reshape(3, 4) / 10
    with engine.begin() as conn:
        vectors.store(conn, "model-a", 4, written[:3], mine, datetime.now(UTC), existing=dict.fromkeys(written, False))
        vectors.store(conn, "model-b", 4, written[1:2], np.ones((1, 4), np.float32), datetime.now(UTC),
                      existing=dict.fromkeys(written, False))
    engine.dispose()
    conn, statements = reader
    loaded = CandidateRows(conn, search_clause(MemoryFilter(), datetime.now(UTC)), vector_model="model-a")
    found = loaded.fetch(written[1:], with_vectors=True)
    assert len(statements) == 1
    assert set(found) == set(written[1:4]) and set(loaded.vectors) == set(written[1:3])  # the 4th has no vector
    assert loaded.read_with_vectors == set(written[1:])
    found = loaded.fetch(written)  # the first row comes without (the dense hits have theirs already)
    assert len(statements) == 2 and written[0] in found and set(loaded.vectors) == set(written[1:3])
    found = loaded.fetch(written[:1], with_vectors=True)  # read once: nothing more
    assert len(statements) == 2 and loaded.read_with_vectors == set(written[1:])
    loaded.fetch([*written[:1], "no-such-id"], with_vectors=True)
    assert len(statements) == 3 and loaded.read_with_vectors == {*written[1:], "no-such-id"}
    assert set(loaded.vectors) == set(written[1:3])
    for i, memory_id in enumerate(written[1:3], 1):
        np.testing.assert_array_equal(loaded.vectors[memory_id], mine[i])
        assert loaded.vectors[memory_id].dtype == np.float32
    row = loaded.fetch(written[1:2])[written[1]]
    assert "m3_stored_vector" not in row  # not a column of the row
    loaded.complete(written[1:2])
    assert row.complete and set(row) == ALL_COLUMNS
    plain = CandidateRows(conn, true())
    plain.fetch(written, with_vectors=True)  # no model: nothing to read with the rows
    assert plain.vectors == {} and plain.read_with_vectors == set()
