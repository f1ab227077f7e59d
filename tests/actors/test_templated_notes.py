"""Load: many agents writing templated notes that differ only in numbers and names through the real Writer
and the real embedder retire none of them (issue 12: 2,731 of 2,780 such notes were retired)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from sqlalchemy import func, select

from m3.actors.system import ActorSystem
from m3.protocols.messages.memory import WriteOutcome
from m3.store import schema
from tests.actors.conftest import WAIT_S, write_one
from tests.stored import fresh

NAMES = ("Alice", "Bruno", "Chen", "Dana", "Emeka", "Farah", "Goran", "Hana", "Ivan", "Julia")
WRITERS = 16
#: Embedding 200 notes and deciding on each vector (a pgvector query each on PostgreSQL) on 2 busy cores.
EMBED_S = 180.0


def note(n: int) -> str:
    return (f"Customer {4400 + n} ({NAMES[n % len(NAMES)]}) ordered {1 + n % 7} laptops "
            f"on 2026-11-{1 + n % 28:02d} for ${1200 + 35 * n}.")


def test_two_hundred_templated_notes_from_concurrent_writers_all_stay_current(
        system: ActorSystem, store_url: str) -> None:
    texts = [note(n) for n in range(200)]
    assert len(set(texts)) == len(texts)

    def write(n: int) -> WriteOutcome:
        out: WriteOutcome = system.writer.ask(write_one(texts[n], actor=f"agent{n % WRITERS}", type="note"),
                                              WAIT_S)[0]
        return out

    with ThreadPoolExecutor(WRITERS) as pool:
        written = list(pool.map(write, range(len(texts))))
    assert all(out.created for out in written)
    system.wait_embedded(EMBED_S)
    m, c = schema.memories, schema.conflicts
    with fresh(store_url) as conn:
        retired = conn.execute(select(func.count()).where(m.c.retired_at.is_not(None))).scalar_one()
        current = conn.execute(select(func.count()).where(m.c.retired_at.is_(None))).scalar_one()
        embedded = conn.execute(select(func.count()).select_from(schema.memory_embeddings)).scalar_one()
        flagged = conn.execute(select(func.count()).select_from(c)).scalar_one()
    assert (retired, current, embedded) == (0, 200, 200)
    assert flagged > 0  # they were near each other: recorded as conflict candidates instead
