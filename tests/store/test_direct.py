"""Direct inserts store exactly what SQLAlchemy's insert stores, on both stores."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, insert, select
from sqlalchemy.exc import IntegrityError

from m3.protocols.messages.memory import NewMemory
from m3.store import memories as rows
from m3.store.direct import DirectInsert
from m3.store.engine import StoreOptions, migrate, open_engine
from m3.store.schema import memories as m
from m3.store.schema import memory_history as h


@pytest.fixture(scope="module")
def engine(module_store_url: str) -> Iterator[Engine]:
    eng = open_engine(StoreOptions(url=module_store_url), "writer")
    migrate(eng)
    yield eng
    eng.dispose()


# Text as m3 accepts it (the tools refuse NUL and lone surrogates before anything reaches a store).
chars = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")
keys = st.text(chars, max_size=8)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(chars, max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=3),
    max_leaves=8,
)
times = st.datetimes(min_value=datetime(1970, 1, 2), max_value=datetime(9999, 12, 30),
                     timezones=st.sampled_from([UTC, timezone(timedelta(hours=5, minutes=30))]))
texts = st.text(chars, min_size=1, max_size=60)


def _stored(conn: Any, table: Any, key: Any, value: str) -> dict[str, Any]:
    row = conn.execute(select(table).where(key == value)).mappings().one()
    return {k: v for k, v in row.items() if k not in ("seq", "id", "memory_id")}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(content=texts, title=st.none() | texts, metadata=st.dictionaries(keys, json_values, max_size=4),
       importance=st.floats(0, 1), pinned=st.booleans(), expires=st.none() | times, valid_from=st.none() | times,
       now=times, details=st.dictionaries(keys, json_values, max_size=4))
def test_a_direct_insert_stores_the_values_sqlalchemys_insert_stores(
        engine: Engine, content: str, title: str | None, metadata: dict[str, Any], importance: float, pinned: bool,
        expires: datetime | None, valid_from: datetime | None, now: datetime, details: dict[str, Any]) -> None:
    memory = NewMemory(type="note", content=content, title=title, metadata=metadata, importance=importance,
                       pinned=pinned, expires_at=expires, valid_from=valid_from, agent_id="a", conversation_id="c")
    direct_id, core_id = str(uuid.uuid4()), str(uuid.uuid4())
    with engine.begin() as conn:
        for memory_id, run in ((direct_id, "direct"), (core_id, "core")):
            values = rows.memory_values(memory, memory_id=memory_id, digest=rows.content_hash(content), now=now)
            event = rows.event(memory_id, "created", "agent-x", now, **details)
            if run == "direct":
                rows.insert_memories(conn, [values])
                rows.record_events(conn, [event])
            else:
                conn.execute(insert(m), [values])
                conn.execute(insert(h), [event])
        assert _stored(conn, m, m.c.id, direct_id) == _stored(conn, m, m.c.id, core_id)
        assert _stored(conn, h, h.c.memory_id, direct_id) == _stored(conn, h, h.c.memory_id, core_id)
        conn.rollback()


def test_a_direct_insert_of_many_rows_keeps_their_order_and_runs_in_the_callers_transaction(engine: Engine) -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    ids = [str(uuid.uuid4()) for _ in range(5)]
    with engine.begin() as conn:
        rows.insert_memories(conn, [rows.memory_values(NewMemory(type="note", content=f"direct {i}"),
                                                       memory_id=memory_id, digest=rows.content_hash(f"direct {i}"),
                                                       now=now)
                                    for i, memory_id in enumerate(ids)])
        stored = conn.execute(select(m.c.id).where(m.c.id.in_(ids)).order_by(m.c.seq)).scalars().all()
        assert stored == ids
        conn.rollback()
    with engine.connect() as conn:
        assert conn.execute(select(m.c.id).where(m.c.id.in_(ids))).first() is None  # rolled back with it


def test_a_direct_insert_refuses_columns_its_table_lacks() -> None:
    with pytest.raises(ValueError, match="no columns"):
        DirectInsert(m, ["id", "colour"])


def test_a_row_missing_a_column_fails_before_anything_is_written(engine: Engine) -> None:
    with engine.begin() as conn, pytest.raises(KeyError):
        rows.record_events(conn, [{"memory_id": "x", "event": "created", "at": datetime.now(UTC), "details": {}}])


def test_a_driver_error_of_a_direct_insert_comes_out_as_sqlalchemys_error(engine: Engine) -> None:
    # The Writer tells a lost race or a lock (OperationalError) from a bad request by SQLAlchemy's classes.
    values = rows.memory_values(NewMemory(type="note", content="twice"), memory_id=str(uuid.uuid4()),
                                digest=rows.content_hash("twice"), now=datetime(2026, 1, 1, tzinfo=UTC))
    with engine.begin() as conn, pytest.raises(IntegrityError):
        rows.insert_memories(conn, [values, values])
