"""Shared task trees through the service, on each store: states, versions, claims, leases, trees, deletion."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
import trio

from m3.errors import M3Error
from m3.gateway.service import CallContext, Service
from tests.helpers import call
from tests.processes import race

LEAD, W1, W2 = (CallContext(agent_id=name) for name in ("lead", "worker-1", "worker-2"))
#: A short lease for the expiry tests; the waits for it are notifications, not sleeps.
SHORT_LEASE_S = 1.5
WAIT_S = 20.0


def register(service: Service, *contexts: CallContext) -> None:
    for ctx in contexts:
        call(service, "agent_register", ctx)


def error_of(service: Service, tool: str, ctx: CallContext, **args: Any) -> M3Error:
    with pytest.raises(M3Error) as raised:
        call(service, tool, ctx, **args)
    return raised.value


def move(service: Service, task: dict[str, Any], state: str, ctx: CallContext = LEAD) -> dict[str, Any]:
    return call(service, "task_update", ctx, id=task["id"], version=task["version"], state=state)


#: A legal path from pending to each state.
PATHS: dict[str, list[str]] = {
    "pending": [], "in_progress": ["in_progress"], "blocked": ["blocked"],
    "completed": ["in_progress", "completed"], "failed": ["in_progress", "failed"], "cancelled": ["cancelled"],
}
LEGAL = {("pending", "in_progress"), ("pending", "blocked"), ("pending", "cancelled"),
         ("in_progress", "pending"), ("in_progress", "blocked"), ("in_progress", "completed"),
         ("in_progress", "failed"), ("in_progress", "cancelled"), ("blocked", "pending"),
         ("blocked", "in_progress"), ("blocked", "failed"), ("blocked", "cancelled"), ("failed", "pending")}


def task_in(service: Service, state: str) -> dict[str, Any]:
    task = call(service, "task_create", LEAD, title=f"reach {state}")
    for step in PATHS[state]:
        task = move(service, task, step)
    assert task["state"] == state
    return task


@pytest.mark.parametrize("start", list(PATHS))
def test_the_state_machine_allows_exactly_its_moves_and_names_the_allowed_ones_otherwise(
        service: Service, start: str) -> None:
    for target in PATHS:
        if target == start:
            continue
        task = task_in(service, start)
        if (start, target) in LEGAL:
            moved = move(service, task, target)
            assert (moved["state"], moved["version"]) == (target, task["version"] + 1)
        else:
            error = error_of(service, "task_update", LEAD, id=task["id"], version=task["version"], state=target)
            assert error.code == "illegal_transition", (start, target)
            assert sorted(error.details["allowed"]) == sorted(t for s, t in LEGAL if s == start)
            assert call(service, "task_get", LEAD, id=task["id"])["version"] == task["version"]


def test_a_stale_version_is_a_conflict_and_leaves_the_task_and_its_history_as_they_were(service: Service) -> None:
    task = call(service, "task_create", LEAD, title="Ship it")
    newer = call(service, "task_update", W1, id=task["id"], version=task["version"], title="Ship it today")
    error = error_of(service, "task_update", W2, id=task["id"], version=task["version"], state="cancelled")
    assert error.code == "conflict"
    assert error.details["current_version"] == newer["version"]
    now = call(service, "task_get", LEAD, id=task["id"], history=True)
    assert (now["state"], now["title"], now["version"]) == ("pending", "Ship it today", newer["version"])
    assert [(e["event"], e["actor"]) for e in now["history"]] == [("created", "lead"), ("updated", "worker-1")]
    assert now["history"][1]["details"]["previous"] == {"title": "Ship it"}


def test_twenty_workers_racing_for_ten_tasks_get_exactly_ten_distinct_claims(service: Service) -> None:
    workers = [CallContext(agent_id=f"racer-{i:02d}") for i in range(20)]
    register(service, *workers)
    created = {call(service, "task_create", LEAD, title=f"job {i}", kind="race")["id"] for i in range(10)}
    barrier = threading.Barrier(len(workers))
    results: dict[str, dict[str, Any]] = {}

    def worker(ctx: CallContext) -> None:
        barrier.wait(timeout=WAIT_S)
        results[str(ctx.agent_id)] = call(service, "task_claim", ctx, filter={"kind": "race"}, lease=60)

    threads = [threading.Thread(target=worker, args=(ctx,)) for ctx in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=WAIT_S)
    assert len(results) == 20
    won = {agent: r["task"] for agent, r in results.items() if r["claimed"]}
    assert len(won) == 10
    assert {t["id"] for t in won.values()} == created
    assert all(t["owner"] == agent and t["state"] == "in_progress" for agent, t in won.items())
    assert sum(not r["claimed"] and r["task"] is None for r in results.values()) == 10


def test_an_expired_lease_makes_the_task_claimable_again_and_tells_the_creator(service: Service) -> None:
    register(service, LEAD, W1, W2)
    task = call(service, "task_create", LEAD, title="Flaky job")
    first = call(service, "task_claim", W1, lease=SHORT_LEASE_S)
    assert first["task"]["id"] == task["id"]
    assert call(service, "task_claim", W2)["claimed"] is False  # the lease is valid: nobody else gets it

    # The lease clock sweeps right after the lease ends and notifies the creator: wait for that.
    news = call(service, "notifications_wait", LEAD, timeout=WAIT_S)
    assert (news["timed_out"], [n["kind"] for n in news["items"]]) == (False, ["lease_expired"])
    assert call(service, "task_get", LEAD, id=task["id"])["state"] == "pending"

    second = call(service, "task_claim", W2, lease=60)
    assert (second["task"]["id"], second["task"]["owner"]) == (task["id"], "worker-2")
    # The first worker's lease is gone: renewing fails, and so does finishing with its old version.
    assert error_of(service, "task_heartbeat", W1, id=task["id"]).code == "lease_lost"
    stale = error_of(service, "task_update", W1, id=task["id"], version=first["task"]["version"], state="completed")
    assert stale.code == "conflict"
    events = [e["event"] for e in call(service, "task_get", LEAD, id=task["id"], history=True)["history"]]
    assert events == ["created", "claimed", "lease_expired", "claimed"]


def test_a_heartbeat_renews_the_lease_without_changing_the_version(service: Service) -> None:
    register(service, LEAD, W1, W2)
    call(service, "task_create", LEAD, title="Long job")
    claimed = call(service, "task_claim", W1, lease=30)["task"]
    renewed = call(service, "task_heartbeat", W1, id=claimed["id"], lease=600)
    assert renewed["lease_expires_at"] > claimed["lease_expires_at"]
    assert renewed["version"] == claimed["version"]
    assert error_of(service, "task_heartbeat", W2, id=claimed["id"]).code == "lease_lost"
    done = call(service, "task_update", W1, id=claimed["id"], version=renewed["version"], state="completed")
    assert (done["state"], done["lease_expires_at"], done["owner"]) == ("completed", None, "worker-1")


def test_a_holder_releases_its_task_back_to_pending_and_its_creator_hears_why(service: Service) -> None:
    register(service, LEAD, W1, W2)
    call(service, "task_create", LEAD, title="Migrate the wiki")
    claimed = call(service, "task_claim", W1, lease=600)["task"]
    assert error_of(service, "task_release", W2, id=claimed["id"]).code == "lease_lost"  # not its task
    back = call(service, "task_release", W1, id=claimed["id"], reason="blocked on credentials")
    assert (back["state"], back["owner"], back["lease_expires_at"]) == ("pending", None, None)
    assert back["version"] == claimed["version"] + 1
    news = call(service, "notifications_poll", LEAD)["items"]
    assert [n["kind"] for n in news] == ["task_released"]
    history = call(service, "task_get", LEAD, id=claimed["id"], history=True)["history"]
    assert [(e["event"], e["details"].get("reason")) for e in history][-1] == ("released", "blocked on credentials")
    assert error_of(service, "task_release", W1, id=claimed["id"]).code == "lease_lost"  # released already
    again = call(service, "task_claim", W2, lease=600)["task"]
    assert (again["id"], again["owner"]) == (claimed["id"], "worker-2")


def test_claims_take_the_most_urgent_matching_task_and_respect_assignment(service: Service) -> None:
    register(service, LEAD, W1, W2)
    root = call(service, "task_create", LEAD, title="Release")
    call(service, "task_create", LEAD, title="low", parent_id=root["id"], priority=1)
    high = call(service, "task_create", LEAD, title="high", parent_id=root["id"], priority=9)
    other = call(service, "task_create", LEAD, title="elsewhere", priority=50)
    mine = call(service, "task_create", LEAD, title="for worker-2", priority=99, assignee="worker-2")
    got = call(service, "task_claim", W1, filter={"parent_id": root["id"][:8]})["task"]
    assert got["id"] == high["id"]
    assert call(service, "task_claim", W1)["task"]["id"] == other["id"]  # worker-2's task is not offered
    assert call(service, "task_claim", W2)["task"]["id"] == mine["id"]


def test_a_task_tree_shows_subtasks_to_the_depth_asked_and_counts_what_lies_beyond(service: Service) -> None:
    root = call(service, "task_create", LEAD, title="root")
    child = call(service, "task_create", LEAD, title="child", parent_id=root["id"])
    grandchild = call(service, "task_create", LEAD, title="grandchild", parent_id=child["id"])
    call(service, "task_create", LEAD, title="great-grandchild", parent_id=grandchild["id"])
    tree = call(service, "task_tree", LEAD, id=root["id"], depth=2)["tree"]
    assert [c["title"] for c in tree["children"]] == ["child"]
    leaf = tree["children"][0]["children"][0]
    assert (leaf["title"], leaf["children"], leaf["child_count"]) == ("grandchild", [], 1)


def test_soft_delete_hides_the_subtree_and_hard_delete_needs_it_first_and_a_confirmation(service: Service) -> None:
    root = call(service, "task_create", LEAD, title="root")
    child = call(service, "task_create", LEAD, title="child", parent_id=root["id"])
    assert error_of(service, "task_delete", LEAD, id=root["id"], version=1, hard=True,
                    confirm=True).code == "invalid_argument"
    gone = call(service, "task_delete", LEAD, id=root["id"], version=root["version"], reason="obsolete")
    assert (gone["deleted"], gone["affected"]) == ("soft", 2)
    assert call(service, "task_list", LEAD)["count"] == 0
    assert call(service, "task_claim", W1)["claimed"] is False
    assert call(service, "task_get", LEAD, id=child["id"])["deleted_at"] is not None
    assert error_of(service, "task_delete", LEAD, id=root["id"], version=gone["version"],
                    hard=True).code == "confirmation_required"
    erased = call(service, "task_delete", LEAD, id=root["id"], version=gone["version"], hard=True, confirm=True)
    assert (erased["deleted"], erased["affected"]) == ("hard", 2)
    assert error_of(service, "task_get", LEAD, id=child["id"]).code == "not_found"


def test_a_result_links_a_memory_and_lists_filter_by_effective_state(service: Service) -> None:
    register(service, LEAD, W1)
    task = call(service, "task_create", LEAD, title="Summarise the logs", kind="summary")
    claimed = call(service, "task_claim", W1, filter={"kind": "summary"})["task"]
    memory = call(service, "memory_write", W1, content="Logs show two timeouts on Monday.", scope="org")
    with_result = call(service, "task_set_result", W1, id=task["id"], version=claimed["version"],
                       memory_id=memory["id"][:8], note="two timeouts")
    assert (with_result["result_memory_id"], with_result["result_note"]) == (memory["id"], "two timeouts")
    neither = error_of(service, "task_set_result", W1, id=task["id"], version=with_result["version"])
    assert (neither.code, str(neither)) == ("invalid_argument", "give memory_id, note or both")
    assert [t["id"] for t in call(service, "task_list", LEAD, state="in_progress", owner="worker-1")["items"]] == [
        task["id"]]
    assert call(service, "task_list", LEAD, state="pending")["count"] == 0


def test_claims_from_trio_tasks_of_one_process_never_overlap(service: Service) -> None:
    register(service, LEAD)
    ids = {call(service, "task_create", LEAD, title=f"t{i}")["id"] for i in range(6)}

    async def main() -> list[dict[str, Any]]:
        got: list[dict[str, Any]] = []

        async def claim(i: int) -> None:
            got.append(await service.call("task_claim", {"agent_id": f"w{i}"}, LEAD))

        async with trio.open_nursery() as nursery:
            for i in range(12):
                nursery.start_soon(claim, i)
        return got

    got = trio.run(main)
    assert sorted(r["task"]["id"] for r in got if r["claimed"]) == sorted(ids)


CLAIMER = """
import json, sys, threading, trio
from m3.gateway.runtime import running
from m3.gateway.service import CallContext
workers = [f"{sys.argv[1]}-{i}" for i in range(int(sys.argv[2]))]
with running(drain_embeddings=False) as svc:
    print("ready", flush=True)
    sys.stdin.readline()
    results = {}
    def claim(agent):
        ctx = CallContext(agent_id=agent)
        results[agent] = trio.run(svc.call, "task_claim", {"filter": {"kind": "race"}, "lease": 60}, ctx)
    threads = [threading.Thread(target=claim, args=(w,)) for w in workers]
    for t in threads: t.start()
    for t in threads: t.join()
    print(json.dumps(results), flush=True)
"""


def test_twenty_workers_in_four_processes_racing_for_ten_tasks_get_exactly_ten_distinct_claims(
        service: Service, child_env: dict[str, str]) -> None:
    created = {call(service, "task_create", LEAD, title=f"job {i}", kind="race")["id"] for i in range(10)}
    finished = race(CLAIMER, [[f"proc{n}", "5"] for n in range(4)], child_env, timeout=120)
    results: dict[str, dict[str, Any]] = {}
    for code, out, err in finished:
        assert code == 0, err
        results.update(json.loads(out.strip().splitlines()[-1]))
    assert len(results) == 20
    won = [r["task"]["id"] for r in results.values() if r["claimed"]]
    assert sorted(won) == sorted(created)  # ten claims, each task once
    owners = {t["id"]: t["owner"] for t in call(service, "task_list", LEAD, kind="race")["items"]}
    assert owners == {r["task"]["id"]: agent for agent, r in results.items() if r["claimed"]}


def test_a_task_under_a_valid_lease_refuses_changes_by_anyone_but_its_holder_until_the_lease_ends(
        service: Service) -> None:
    register(service, LEAD, W1, W2)
    task = call(service, "task_create", LEAD, title="Held job")
    claimed = call(service, "task_claim", W1, lease=SHORT_LEASE_S)["task"]
    version = claimed["version"]
    for ctx in (LEAD, W2):
        for tool, args in (("task_update", {"state": "cancelled"}), ("task_update", {"title": "renamed"}),
                           ("task_set_result", {"note": "not mine"}), ("task_delete", {})):
            refused = error_of(service, tool, ctx, id=task["id"], version=version, **args)
            assert (refused.code, refused.details["owner"]) == ("lease_held", "worker-1"), (tool, ctx.agent_id)
    events = [e["event"] for e in call(service, "task_get", LEAD, id=task["id"], history=True)["history"]]
    assert events == ["created", "claimed"]  # nothing of the refused changes was written

    # The holder may; once the lease has run out (the creator hears of it), anyone may again.
    noted = call(service, "task_set_result", W1, id=task["id"], version=version, note="half done")
    news = call(service, "notifications_wait", LEAD, timeout=WAIT_S)
    assert [n["kind"] for n in news["items"]] == ["lease_expired"]
    moved = call(service, "task_update", LEAD, id=task["id"], version=noted["version"], state="cancelled")
    assert (moved["state"], moved["result_note"]) == ("cancelled", "half done")
