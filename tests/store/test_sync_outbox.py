"""The sync outbox numbers its entries in push order, and never gives a number twice."""

from __future__ import annotations

from sqlalchemy import create_engine, delete, insert
from sqlalchemy.pool import NullPool

from m3.store import schema


def test_an_outbox_seq_is_never_given_again_after_a_confirmed_push_emptied_the_outbox(store_url: str) -> None:
    # The warehouse skips a node's entries at or below the last seq it applied, so a reused seq is a lost change.
    outbox = schema.sync_outbox
    engine = create_engine(store_url, poolclass=NullPool)
    try:
        with engine.begin() as conn:
            first = conn.execute(insert(outbox).values(tbl="memories", key="a", row_seq=1, hlc=1)).inserted_primary_key
            conn.execute(delete(outbox))
            second = conn.execute(insert(outbox).values(tbl="memories", key="b", row_seq=2, hlc=2)).inserted_primary_key
    finally:
        engine.dispose()
    assert first is not None and second is not None and second[0] > first[0]
