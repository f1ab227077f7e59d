"""memory_unconsolidate through the service and the CLI, on each store: the belief is retired (kept in history),
its links are removed, its sources are untouched and still found, and the pass does not roll them up again."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import func, select

from m3.actors.system import ActorSystem
from m3.errors import M3Error
from m3.gateway.service import CallContext, Service
from m3.protocols.messages.rollup import CommitRollup
from m3.store.engine import StoreOptions, open_engine
from m3.store.schema import memories as m
from tests.cognition.rollup_driver import WAIT_S, run_until_idle
from tests.gateway.outcomes import Run

A, B = CallContext(agent_id="agent-a"), CallContext(agent_id="agent-b")
#: The CLI's identity when none is configured (identity.agent_id).
LOCAL = CallContext(agent_id="local")

NOTES = (
    "Production deploys happen on Friday afternoons, after the staging checks pass.",
    "We deploy to production every Friday once the staging checks are green.",
    "Friday is deploy day: production gets the release after staging checks pass.",
)


async def rolled_up(service: Service, system: ActorSystem, ctx: CallContext = A) -> tuple[str, list[str]]:
    """Write the related notes as ``ctx``, run the pass: (the one belief's id, the notes' ids)."""
    notes = [str((await service.call("memory_write", {"content": text, "type": "note"}, ctx))["id"])
             for text in NOTES]
    assert run_until_idle(system) == 1
    [belief] = (await service.call("memory_list", {"type": "belief"}, ctx))["items"]
    return str(belief["id"]), notes


def memory_rows(system: ActorSystem) -> int:
    engine = open_engine(StoreOptions(url=system.options.url), "reader")
    try:
        with engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(m)).scalar_one())
    finally:
        engine.dispose()


def rescan(system: ActorSystem) -> int:
    """Run the pass over every vector again (a watermark of another model) and count the beliefs written."""
    system.writer.ask(CommitRollup(watermark={"model": "another-model", "seq": 0}), WAIT_S)
    return run_until_idle(system)


async def edges(service: Service, memory_id: str, ctx: CallContext = A) -> list[dict[str, Any]]:
    return list((await service.call("memory_graph", {"id": memory_id}, ctx))["edges"])


@pytest.mark.anyio
async def test_undo_retires_the_belief_removes_its_links_and_leaves_the_sources_current_and_found(
        service: Service, system: ActorSystem) -> None:
    belief, notes = await rolled_up(service, system)
    before = memory_rows(system)
    done = await service.call("memory_unconsolidate", {"id": belief, "reason": "too coarse"}, A)
    assert done["id"] == belief and sorted(done["sources"]) == sorted(notes) and done["allow_again"] is False
    record = await service.call("memory_get", {"id": belief}, A)
    assert record["retired_at"] is not None and record["retire_reason"] == "unconsolidated"
    assert [e for e in await edges(service, notes[0]) if e["type"] == "consolidates"] == []
    events = (await service.call("memory_history", {"id": belief}, A))["events"]
    assert events[-1]["event"] == "unconsolidated" and sorted(events[-1]["details"]["sources"]) == sorted(notes)
    for note in notes:
        assert (await service.call("memory_get", {"id": note}, A))["retired_at"] is None
    found = await service.call("memory_search", {"query": "when do production deploys happen", "k": 10}, A)
    assert set(notes) <= {item["id"] for item in found["items"]} and belief not in {i["id"] for i in found["items"]}
    assert memory_rows(system) == before  # nothing hard-deleted
    assert rescan(system) == 0  # not rolled up again


@pytest.mark.anyio
async def test_with_allow_again_the_pass_may_summarise_the_same_notes_again(
        service: Service, system: ActorSystem) -> None:
    belief, notes = await rolled_up(service, system)
    await service.call("memory_unconsolidate", {"id": belief, "allow_again": True}, A)
    assert rescan(system) == 1
    [again] = (await service.call("memory_list", {"type": "belief"}, A))["items"]
    assert again["id"] != belief
    assert {e["to_id"] for e in await edges(service, again["id"]) if e["type"] == "consolidates"} == set(notes)


@pytest.mark.anyio
async def test_undo_of_a_note_an_unknown_id_a_retired_belief_or_anothers_belief_is_a_coded_error(
        service: Service, system: ActorSystem) -> None:
    belief, notes = await rolled_up(service, system)
    cases = ((notes[0], A, "not_a_summary"), ("00000000-0000-4000-8000-000000000000", A, "not_found"),
             (belief, B, "not_found"))
    for memory_id, ctx, code in cases:
        with pytest.raises(M3Error) as raised:
            await service.call("memory_unconsolidate", {"id": memory_id}, ctx)
        assert raised.value.code == code and raised.value.hint
    await service.call("memory_unconsolidate", {"id": belief}, A)
    with pytest.raises(M3Error) as raised:
        await service.call("memory_unconsolidate", {"id": belief}, A)
    assert raised.value.code == "invalid_argument" and "already retired" in raised.value.message
    assert (await service.call("memory_get", {"id": notes[0]}, A))["retired_at"] is None


@pytest.mark.anyio
async def test_the_cli_undoes_a_belief_and_answers_a_note_with_not_a_summary(
        service: Service, system: ActorSystem, m3: Run) -> None:
    belief, notes = await rolled_up(service, system, LOCAL)
    system.stop()
    refused = m3("memory", "unconsolidate", "--id", notes[0]).error()
    assert refused["code"] == "not_a_summary"
    done = m3("memory", "unconsolidate", "--id", belief, "--reason", "wrong").document()
    assert done["id"] == belief and sorted(done["sources"]) == sorted(notes)
    record = m3("memory", "get", "--id", belief).document()
    assert record["retire_reason"] == "unconsolidated"
    assert m3("memory", "get", "--id", notes[1]).document()["retired_at"] is None
