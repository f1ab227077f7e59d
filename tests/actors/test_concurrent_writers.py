"""Several processes writing one PostgreSQL store at once: supersession and deduplication stay exactly-once.

On SQLite one file lock serialises every writer (tests/actors/test_writer.py);
on PostgreSQL each process has its own Writer and their transactions
overlap, so these tests only make sense there.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import func, select

from m3.actors.base import ThreadReply
from m3.actors.supervisor import ActorHandle
from m3.errors import Timeout
from m3.protocols.messages.memory import StoreVectors
from m3.retrieval.pg_locks import LockedCandidates
from m3.store import memories as rows
from m3.store import schema, vectors
from m3.store.engine import StoreOptions, open_engine
from tests.actors.conftest import WAIT_S, write_one
from tests.processes import race
from tests.stored import fresh

pytestmark = pytest.mark.store_only("postgres", reason="SQLite's single write lock already serialises writers; "
                                                       "only PostgreSQL has concurrent writers")

REPO_ROOT = Path(__file__).resolve().parents[2]
MODEL, DIM = "test-model", 16
EXEMPT = frozenset({"conversation", "event", "observation"})


def near_copies(seed: int, n: int) -> np.ndarray:
    """``n`` unit vectors with pairwise cosine far above the 0.92 threshold."""
    rng = np.random.default_rng(seed)
    base = rng.standard_normal(DIM)
    out = base + 0.02 * rng.standard_normal((n, DIM))
    return (out / np.linalg.norm(out, axis=1, keepdims=True)).astype(np.float32)


def store_vectors(ids: list[str], matrix: np.ndarray) -> StoreVectors:
    return StoreVectors(model=MODEL, dim=DIM, ids=tuple(ids), vectors=np.ascontiguousarray(matrix, "<f4").tobytes())


def current_of(url: str, agent: str) -> list[str]:
    """Ids of the agent's current facts."""
    m = schema.memories
    with fresh(url) as conn:
        return [r[0] for r in conn.execute(select(m.c.id).where(
            m.c.agent_id == agent, m.c.type == "fact", m.c.retired_at.is_(None)))]


def test_a_second_writer_waits_for_the_first_to_commit_its_group_and_then_supersedes_it(
        start_writer: Callable[..., ActorHandle], store_options: StoreOptions) -> None:
    writer = start_writer()
    old, new = "The API uses the old PostgreSQL version", "The API uses the newest PostgreSQL version"
    older = writer.ask(write_one(old, type="fact", agent_id="ops"), WAIT_S)[0].id
    newer = writer.ask(write_one(new, type="fact", agent_id="ops"), WAIT_S)[0].id
    pair = near_copies(1, 2)
    other = open_engine(store_options, "writer")  # another process's Writer, in the middle of its transaction
    try:
        with other.connect() as conn:
            tx = conn.begin()
            first = store_vectors([older], pair[:1])
            LockedCandidates(EXEMPT).prepare(conn, [first])
            found = rows.decision_rows(conn, [older], MODEL)
            vectors.store(conn, MODEL, DIM, [older], pair[:1], datetime.now(UTC),
                          existing={i: bool(row["has_vector"]) for i, row in found.items()})
            reply = ThreadReply()
            writer.tell(store_vectors([newer], pair[1:]), reply)
            with pytest.raises(Timeout):  # blocked on the group's lock, not deciding without the other's vector
                reply.wait(0.5)
            tx.commit()
        reply.wait(WAIT_S)
    finally:
        other.dispose()
    assert current_of(store_options.url, "ops") == [newer]


CHILD = """
import sys
import numpy as np
from m3.retrieval.supersession import SupersessionPolicy
from m3.actors.supervisor import ActorHandle
from m3.actors.writer import Writer
from m3.protocols.messages.memory import NewMemory, StoreVectors, WriteMemories
from m3.store.engine import StoreOptions

url, me, groups, dim = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
policy = SupersessionPolicy(threshold=0.92, exempt_types=frozenset({"conversation", "event", "observation"}))
writer = ActorHandle("writer", Writer, StoreOptions(url=url), max_batch=64, policy=policy, searcher=None,
                     embedder=None).start()
print("ready", flush=True)
sys.stdin.readline()
for g in range(groups):
    rng = np.random.default_rng(g)
    base = rng.standard_normal(dim)
    vec = base + 0.02 * np.random.default_rng(1000 * g + me).standard_normal(dim)
    vec = (vec / np.linalg.norm(vec)).astype("<f4")
    # The same event (exempt from supersession) from every process, and each process's version of a fact.
    same = NewMemory(type="event", agent_id=f"agent{g}", content=f"Team {g} deployed release {g}.")
    # Each process's version differs in a word, not in an anchor (a number would make it a distinct fact).
    word = ("early", "late", "weekly", "often", "rarely", "quietly", "slowly", "fast")[me]
    mine = NewMemory(type="fact", agent_id=f"agent{g}", content=f"Deploys for team {g} run {word} on Fridays.")
    out = writer.ask(WriteMemories(memories=(same, mine), actor=f"process{me}"), 60)
    writer.ask(StoreVectors(model="test-model", dim=dim, ids=(out[1].id,), vectors=vec.tobytes()), 60)
writer.stop()
print("done", flush=True)
"""


def test_processes_racing_to_write_near_identical_memories_leave_exactly_one_current_each(store_url: str) -> None:
    processes, groups = 4, 12
    env = {"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin"}
    finished = race(CHILD, [[store_url, str(p), str(groups), str(DIM)] for p in range(processes)], env, timeout=240)
    for code, out, err in finished:
        assert code == 0, err
        assert out.strip() == "done"
    m, r = schema.memories, schema.memory_relationships
    for g in range(groups):
        agent = f"agent{g}"
        with fresh(store_url) as conn:
            facts = conn.execute(select(m.c.id, m.c.retired_at).where(m.c.agent_id == agent, m.c.type == "fact")).all()
            events = conn.execute(select(func.count()).where(m.c.agent_id == agent, m.c.type == "event")).scalar_one()
            links = conn.execute(select(func.count()).select_from(r).join(m, m.c.id == r.c.to_id).where(
                m.c.agent_id == agent, r.c.type == "supersedes")).scalar_one()
        assert len(facts) == processes
        assert [f.id for f in facts if f.retired_at is None] == current_of(store_url, agent)
        assert len(current_of(store_url, agent)) == 1, f"{agent}: near-identical facts left current"
        assert links == processes - 1  # every retired version is linked to its successor
        assert events == 1, f"{agent}: the identical event was stored {events} times"
