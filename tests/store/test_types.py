"""Column types: aware UTC times and float32 vectors survive the round trip through each store."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from sqlalchemy import Column, Engine, Integer, MetaData, Table, delete, insert, select
from sqlalchemy.exc import StatementError

from m3.store.engine import StoreOptions, open_engine
from m3.store.types import UTCDateTime, VectorType

meta = MetaData()
times = Table("times", meta, Column("id", Integer, primary_key=True), Column("t", UTCDateTime()))
vecs = Table("vecs", meta, Column("id", Integer, primary_key=True), Column("v", VectorType()))


@pytest.fixture(scope="module")
def engine(module_store_url: str) -> Iterator[Engine]:
    """The store's own engine (on PostgreSQL: UTC sessions, pgvector's binary adapters)."""
    eng = open_engine(StoreOptions(url=module_store_url), "writer")
    meta.create_all(eng)
    yield eng
    eng.dispose()


def roundtrip_time(engine: Engine, value: datetime) -> datetime | None:
    with engine.begin() as conn:
        conn.execute(delete(times))
        conn.execute(insert(times).values(id=1, t=value))
        back: datetime | None = conn.execute(select(times.c.t)).scalar_one()
    return back


aware_times = st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30),
                           timezones=st.sampled_from([UTC, timezone(timedelta(hours=5, minutes=30)),
                                                      timezone(timedelta(hours=-8))]))


@given(value=aware_times)
def test_an_aware_time_comes_back_as_the_same_instant_in_utc(engine: Engine, value: datetime) -> None:
    back = roundtrip_time(engine, value)
    assert back == value
    assert back is not None and back.utcoffset() == timedelta(0) and back.tzinfo is UTC


def test_a_utc_time_keeps_its_microseconds(engine: Engine) -> None:
    value = datetime(2026, 11, 30, 12, 34, 56, 789012, tzinfo=UTC)
    assert roundtrip_time(engine, value) == value


@pytest.mark.parametrize("year", [1, 99, 999])
def test_times_before_year_1000_are_stored_and_read_back(engine: Engine, year: int) -> None:
    # Valid, if odd, user input (valid_from/expires_at): a row that cannot be read back would break every search.
    value = datetime(year, 6, 1, 8, 0, tzinfo=UTC)
    assert roundtrip_time(engine, value) == value


@settings(max_examples=50)
@given(values=st.lists(aware_times, min_size=2, max_size=12))
def test_stored_times_sort_in_time_order(engine: Engine, values: list[datetime]) -> None:
    # Filters such as recorded_at <= as_of compare the stored values in SQL.
    with engine.begin() as conn:
        conn.execute(delete(times))
        conn.execute(insert(times), [{"id": i, "t": v} for i, v in enumerate(values)])
        ordered = conn.execute(select(times.c.t).order_by(times.c.t, times.c.id)).scalars().all()
    assert ordered == sorted(values)


@pytest.mark.parametrize(("text", "expected"), [
    ("2026-03-01 10:00:00+02:00", datetime(2026, 3, 1, 8, 0, tzinfo=UTC)),
    ("2026-03-01 10:00:00.000000-05:30", datetime(2026, 3, 1, 15, 30, tzinfo=UTC)),
    ("2026-03-01 10:00:00", datetime(2026, 3, 1, 10, 0, tzinfo=UTC)),
])
def test_a_time_another_program_wrote_as_text_is_read_as_the_same_instant_in_utc(
        engine: Engine, text: str, expected: datetime) -> None:
    if engine.dialect.name != "sqlite":
        pytest.skip("SQLite only: PostgreSQL keeps timestamptz, never text")
    with engine.begin() as conn:
        conn.execute(delete(times))
        conn.exec_driver_sql("INSERT INTO times (id, t) VALUES (1, ?)", (text,))
        back = conn.execute(select(times.c.t)).scalar_one()
    assert back == expected and back.tzinfo is UTC


def test_a_naive_time_is_refused(engine: Engine) -> None:
    with pytest.raises(StatementError, match="naive datetime"):
        roundtrip_time(engine, datetime(2026, 1, 1, 12, 0))


def test_none_stays_none(engine: Engine) -> None:
    assert roundtrip_time(engine, None) is None  # type: ignore[arg-type]


# pgvector refuses infinite elements (so does every embedder's output); SQLite's BLOB would keep them.
@settings(max_examples=50)
@given(values=arrays(np.float32, st.integers(1, 64), elements=st.floats(width=32, allow_nan=False,
                                                                         allow_infinity=False)))
def test_a_float32_vector_comes_back_bit_for_bit(engine: Engine, values: np.ndarray) -> None:
    with engine.begin() as conn:
        conn.execute(delete(vecs))
        conn.execute(insert(vecs).values(id=1, v=values))
        back = conn.execute(select(vecs.c.v)).scalar_one()
    assert back.dtype == np.float32
    assert back.tobytes() == values.tobytes()


def test_a_float64_vector_is_stored_as_float32(engine: Engine) -> None:
    with engine.begin() as conn:
        conn.execute(delete(vecs))
        conn.execute(insert(vecs).values(id=1, v=np.array([0.1, 0.2, 0.3], dtype=np.float64)))
        if engine.dialect.name == "postgresql":
            assert conn.exec_driver_sql("SELECT vector_dims(v) FROM vecs").scalar_one() == 3
        else:
            assert len(conn.exec_driver_sql("SELECT v FROM vecs").scalar_one()) == 3 * 4
        back = conn.execute(select(vecs.c.v)).scalar_one()
    np.testing.assert_array_equal(back, np.array([0.1, 0.2, 0.3], dtype=np.float32))
