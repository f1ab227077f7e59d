"""The Writer's group commit with requests run as units: refusals stay alone, merged requests act as in turn."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest
from sqlalchemy import select

from m3.actors.base import Envelope
from m3.actors.supervisor import ActorHandle
from m3.actors.writer import work_units
from m3.errors import InvalidArgument, NotFound, StoreError
from m3.protocols.messages.memory import PinMemory, StoreVectors, TouchMemories, WriteMemories
from m3.store.engine import StoreOptions
from m3.store.schema import memory_embeddings as emb
from tests.actors.conftest import WAIT_S, write_one
from tests.actors.test_writer import BatchRecordingWriter, send, write_lock_held
from tests.stored import count, dump, existing_ids, fresh

REFUSED = "a request refused after its rows were written"
MODEL, DIM = "test-model", 4


class RefusesAfterWriting(BatchRecordingWriter):
    """The real Writer, refusing (an M3 error) any unit of work holding one particular write after it
    has written its rows: what a request refused late (a memory retired meanwhile by another process)
    looks like."""

    def _apply_unit(self, conn: Any, msgs: list[Any]) -> Any:
        result = super()._apply_unit(conn, msgs)
        if any(isinstance(m, WriteMemories) and m.memories[0].content == REFUSED for m in msgs):
            raise InvalidArgument("refused after writing")
        return result


def vector(*values: float) -> np.ndarray:
    v = np.asarray(values, dtype=np.float32)
    return v / np.linalg.norm(v)


def store_vectors(ids: list[str], matrix: np.ndarray) -> StoreVectors:
    return StoreVectors(model=MODEL, dim=DIM, ids=tuple(ids), vectors=matrix.astype("<f4").tobytes())


def vectors_of(url: str) -> dict[str, np.ndarray]:
    with fresh(url) as conn:
        rows = conn.execute(select(emb.c.memory_id, emb.c.vector).where(emb.c.model == MODEL)).all()
    return {row[0]: np.asarray(row[1], dtype=np.float32) for row in rows}


def test_a_request_alone_that_is_refused_after_writing_leaves_nothing_written(
        start_writer: Callable[..., ActorHandle], store_options: StoreOptions) -> None:
    batches: list[int] = []
    writer = start_writer(RefusesAfterWriting, batches=batches)
    before = dump(store_options.url)
    with pytest.raises(InvalidArgument):
        writer.ask(write_one(REFUSED), WAIT_S)
    assert batches == [1]  # alone in its transaction: no savepoint, the transaction itself rolled back
    assert dump(store_options.url) == before
    assert writer.ask(write_one("the next write commits"), WAIT_S)[0].created
    assert count(store_options.url, "memories") == 1


def test_a_refused_request_alone_leaves_the_writer_ready_for_the_next(
        start_writer: Callable[..., ActorHandle], store_options: StoreOptions) -> None:
    writer = start_writer()
    with pytest.raises(NotFound):
        writer.ask(PinMemory(id="00000000-0000-4000-8000-000000000000", pinned=True), WAIT_S)
    out = writer.ask(write_one("written after a refusal"), WAIT_S)[0]
    assert existing_ids(store_options.url, [out.id]) == {out.id}
    assert count(store_options.url, "memory_history") == 1


def test_a_write_refused_in_a_group_fails_alone_and_the_others_commit(
        start_writer: Callable[..., ActorHandle], store_options: StoreOptions) -> None:
    batches: list[int] = []
    writer = start_writer(RefusesAfterWriting, batches=batches)
    with write_lock_held(store_options.url):
        good = [send(writer, write_one(f"good write {i}")) for i in range(3)]
        refused = send(writer, write_one(REFUSED))
        more = [send(writer, write_one(f"later good write {i}")) for i in range(3)]
    with pytest.raises(InvalidArgument):
        refused.wait(WAIT_S)
    ids = [r.wait(WAIT_S)[0].id for r in good + more]
    assert existing_ids(store_options.url, ids) == set(ids)
    assert count(store_options.url, "memories") == 6
    assert count(store_options.url, "memory_history") == 6
    assert max(batches) > 1  # they were sent together: the group failed, then each request ran alone
    stats = writer.statistics()
    assert (stats["handled"], stats["failed"]) == (6, 1)


def test_writes_sent_together_answer_each_request_with_its_own_outcomes(
        start_writer: Callable[..., ActorHandle], store_options: StoreOptions) -> None:
    writer = start_writer()
    with write_lock_held(store_options.url):  # queued meanwhile: they commit together, as one unit of work
        pair = send(writer, WriteMemories(memories=(write_one("first of two").memories[0],
                                                    write_one("second of two").memories[0]), actor="a"))
        repeat = send(writer, write_one("second of two", actor="b"))
        single = send(writer, write_one("on its own", actor="c"))
    first, second = pair.wait(WAIT_S)
    (again,), (alone,) = repeat.wait(WAIT_S), single.wait(WAIT_S)
    assert (first.created, second.created, again.created, alone.created) == (True, True, False, True)
    assert again.id == second.id and again.recorded_at == second.recorded_at
    history = {row[1]: row[3] for row in dump(store_options.url)["memory_history"]}
    assert history == {first.id: "a", second.id: "a", alone.id: "c"}


def test_vectors_stored_by_several_requests_keep_the_last_one_per_memory(
        start_writer: Callable[..., ActorHandle], store_options: StoreOptions) -> None:
    writer = start_writer()
    a, b = (writer.ask(write_one(text, type="event"), WAIT_S)[0].id for text in ("alpha", "beta"))
    first, last, other = vector(1, 0, 0, 0), vector(0, 1, 0, 0), vector(0, 0, 1, 0)
    with write_lock_held(store_options.url):
        replies = [send(writer, store_vectors([a], first[None])),
                   send(writer, store_vectors([b, a], np.stack([other, last])))]
    for r in replies:
        assert r.wait(WAIT_S) is None
    stored = vectors_of(store_options.url)
    np.testing.assert_allclose(stored[a], last)
    np.testing.assert_allclose(stored[b], other)
    assert count(store_options.url, "memory_embeddings") == 2


def test_merged_vector_requests_hold_each_memory_once_with_its_last_vector() -> None:
    first, last, other = vector(1, 0, 0, 0), vector(0, 1, 0, 0), vector(0, 0, 1, 0)
    merged = StoreVectors.merged([store_vectors(["a"], first[None]),
                                  store_vectors(["b", "a"], np.stack([other, last]))])
    assert (merged.model, merged.dim, merged.supersede) == (MODEL, DIM, True)
    assert merged.ids == ("b", "a")
    np.testing.assert_allclose(np.frombuffer(merged.vectors, dtype="<f4").reshape(2, DIM), np.stack([other, last]))


def test_a_malformed_vector_request_sent_with_others_fails_alone(
        start_writer: Callable[..., ActorHandle], store_options: StoreOptions) -> None:
    writer = start_writer()
    a, b = (writer.ask(write_one(text, type="event"), WAIT_S)[0].id for text in ("alpha", "beta"))
    with write_lock_held(store_options.url):
        good = send(writer, store_vectors([a], vector(1, 0, 0, 0)[None]))
        short = send(writer, StoreVectors(model=MODEL, dim=DIM, ids=(b,), vectors=b"\x00" * 8))
    assert good.wait(WAIT_S) is None
    with pytest.raises(StoreError, match="reshape"):
        short.wait(WAIT_S)
    assert set(vectors_of(store_options.url)) == {a}


def test_consecutive_writes_and_vector_stores_of_one_model_form_units_in_request_order() -> None:
    w = write_one("x")
    v = store_vectors(["id"], vector(1, 0, 0, 0)[None])
    v_other = StoreVectors(model="other", dim=DIM, ids=("id",), vectors=vector(1, 0, 0, 0).tobytes())
    pin = PinMemory(id="id", pinned=True)
    touch = TouchMemories(ids=("id",), at=datetime.now(UTC))
    batch = [Envelope(msg) for msg in (w, w, pin, w, v, v, v_other, touch, w)]
    assert work_units(batch) == [[0, 1], [2], [3], [4, 5], [6], [7], [8]]


def test_a_text_repeated_elsewhere_is_a_new_memory_and_in_the_same_place_a_duplicate(
        start_writer: Callable[..., ActorHandle], store_options: StoreOptions) -> None:
    writer = start_writer()
    places = [{"type": "conversation", "conversation_id": "c1"}, {"type": "conversation", "conversation_id": "c2"},
              {"type": "note", "conversation_id": "c1"}, {"type": "note"}, {"type": "note", "agent_id": "a"},
              {"type": "note", "user_id": "u"}]
    first = [writer.ask(write_one("Thanks!", **place), WAIT_S)[0] for place in places]
    assert all(out.created for out in first) and len({out.id for out in first}) == len(places)
    with write_lock_held(store_options.url):  # again, in one group and one request of all six
        replies = [send(writer, write_one("Thanks!", **place)) for place in places]
        together = send(writer, WriteMemories(memories=tuple(write_one("Thanks!", **p).memories[0] for p in places)))
    again = [r.wait(WAIT_S)[0] for r in replies]
    assert [(out.id, out.created) for out in again] == [(out.id, False) for out in first]
    assert [(out.id, out.created) for out in together.wait(WAIT_S)] == [(out.id, False) for out in first]
    assert count(store_options.url, "memories") == len(places)
