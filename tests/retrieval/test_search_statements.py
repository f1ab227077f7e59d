"""A Searcher's statements kept per filter: run again by later searches, each counting from its own time."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Connection

from m3.actors.supervisor import ActorHandle
from m3.protocols.messages.memory import MemoryFilter
from m3.retrieval.candidate_rows import CandidateRows
from m3.retrieval.search_statements import KeptStatements
from m3.store.dialect import dialect_for
from m3.store.engine import StoreOptions, open_engine
from m3.store.id_reads import RANKING_COLUMNS
from tests.actors.conftest import WAIT_S, write_one


@pytest.fixture
def conn(store_options: StoreOptions) -> Iterator[Connection]:
    engine = open_engine(store_options, "reader")
    with engine.connect() as connection:
        yield connection
    engine.dispose()


def test_a_kept_filter_counts_from_the_time_of_the_search_that_runs_it(
        start_writer: Callable[..., ActorHandle], conn: Connection) -> None:
    now = datetime.now(UTC)
    writer = start_writer()
    expiring = writer.ask(write_one("the parking permit is valid", expires_at=now + timedelta(hours=1)),
                          WAIT_S)[0].id
    lasting = writer.ask(write_one("the parking space is number 12"), WAIT_S)[0].id
    kept = KeptStatements()
    found, built = [], []
    for at in (now, now + timedelta(hours=2), now):
        statements = kept.at(at, MemoryFilter())
        with conn.begin():
            rows = CandidateRows(conn, statements.clause, kept=statements.rows).fetch([expiring, lasting])
            hits = dialect_for(conn).memory_hits(conn, "parking", statements.clause, 10, selective=False,
                                                 columns=RANKING_COLUMNS, kept=statements.keyword)
        found.append((set(rows), {hit.id for hit in hits}))
        built.append((len(statements.keyword), len(statements.rows)))
    assert found[0] == ({expiring, lasting}, {expiring, lasting})
    assert found[1] == ({lasting}, {lasting})  # expired two hours on, through the same statements
    assert found[2] == found[0]
    assert built[0] == built[-1] and built[0][0] >= 1 and built[0][1] == 1  # built by the first search only


def test_each_filter_has_its_own_statements_and_only_the_ones_used_last_are_kept() -> None:
    kept = KeptStatements(size=2)
    now = datetime.now(UTC)
    notes, decisions, mine = MemoryFilter(type="note"), MemoryFilter(type="decision"), MemoryFilter(agent_id="a")
    first = kept.at(now, notes)
    assert kept.at(now, decisions) is not first
    assert kept.at(now, MemoryFilter(type="note")) is first  # an equal filter, another object
    kept.at(now, mine)  # the third filter pushes out the one used longest ago: decisions
    assert kept.at(now, notes) is first
    assert kept.at(now, decisions).filter == decisions


def test_the_valid_time_clause_is_made_when_first_asked_for_and_kept() -> None:
    statements = KeptStatements().at(datetime.now(UTC), MemoryFilter(type="note"))
    assert statements._by_valid_time is None
    made = statements.by_valid_time
    assert statements.by_valid_time is made and made is not statements.clause
