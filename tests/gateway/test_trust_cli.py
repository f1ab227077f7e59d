"""Isolation on by default, sharing, isolation of the chat log and of history, and leases — through the real
command line (``m3`` subprocesses, each acting as the agent its environment names), on each store."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from typing import Any

import pytest

Agent = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def as_agent(m3_executable: str, child_env: dict[str, str]) -> Callable[..., Agent]:
    """``as_agent(name, **settings)`` runs ``m3 …`` as agent ``name`` with extra ``M3_*`` settings."""
    def bind(name: str, **settings: str) -> Agent:
        env = {**child_env, "M3_IDENTITY_AGENT_ID": name,
               **{f"M3_{key.upper()}": value for key, value in settings.items()}}

        def run(*argv: str, args: dict[str, Any] | None = None) -> subprocess.CompletedProcess[str]:
            extra = ["--json-file", "-"] if args is not None else []
            return subprocess.run([m3_executable, *argv, *extra], env=env, capture_output=True, text=True,
                                  input=json.dumps(args) if args is not None else None, timeout=120, check=False)
        return run
    return bind


def ok(done: subprocess.CompletedProcess[str]) -> Any:
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def refused(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert (done.returncode, done.stdout) == (1, ""), done.stderr
    error: dict[str, Any] = json.loads(done.stderr)["error"]
    return error


def ids(found: dict[str, Any]) -> set[str]:
    return {item["id"] for item in found["items"]}


def test_private_memories_and_chat_rows_stay_private_by_default_until_their_owner_shares_them(
        as_agent: Callable[..., Agent]) -> None:
    ada, bob = as_agent("ada"), as_agent("bob")
    status = ok(ada("store", "status"))
    assert status["isolation"]["enforce"] is True and status["isolation"]["origin"] == "default"
    ok(bob("agent", "register"))
    private = ok(ada("memory", "write", args={"content": "The vault password rotates on Fridays."}))["id"]
    chat = ok(ada("chatlog", "write", args={"conversation_id": "c1", "role": "user",
                                            "content": "the vault password is in the blue binder"}))["id"]
    public = ok(ada("chatlog", "write", args={"conversation_id": "c1", "role": "user", "scope": "org",
                                              "content": "the vault opens at nine"}))["id"]

    assert private not in ids(ok(bob("memory", "search", args={"query": "vault password Fridays"})))
    assert refused(bob("memory", "get", args={"id": private}))["code"] == "not_found"
    assert ids(ok(bob("chatlog", "search", args={"query": "vault password binder"}))) == {public}
    assert ids(ok(ada("chatlog", "search", args={"query": "vault password binder"}))) == {chat, public}

    shared = ok(ada("memory", "share", args={"id": private, "agents": ["bob"]}))
    assert (shared["changed"], shared["shared_with"]) == (["bob"], ["bob"])
    assert private in ids(ok(bob("memory", "search", args={"query": "vault password Fridays"})))
    assert refused(bob("memory", "unshare", args={"id": private, "agents": ["bob"]}))["code"] == "forbidden"
    events = ok(bob("memory", "history", args={"id": private}))["events"]
    assert (events[-1]["event"], events[-1]["actor"], events[-1]["details"]["agents"]) == ("shared", "ada", ["bob"])

    # The old behaviour, for a store that relied on it: isolation.enforce = false shares everything.
    cyd_open = as_agent("cyd", isolation_enforce="false")
    mode = ok(cyd_open("store", "status"))["isolation"]
    assert (mode["enforce"], mode["mode"], mode["origin"]) == (False, "shared", "env")
    assert chat in ids(ok(cyd_open("chatlog", "search", args={"query": "vault password binder"})))


def test_a_link_made_before_isolation_was_on_reveals_no_private_id_in_history_or_graph(
        as_agent: Callable[..., Agent]) -> None:
    ada, bob_open, bob = as_agent("ada"), as_agent("bob", isolation_enforce="false"), as_agent("bob")
    private = ok(ada("memory", "write", args={"content": "Ada's private incident notes."}))["id"]
    public = ok(bob("memory", "write", args={"content": "Incident runbook for everyone.", "scope": "org"}))["id"]
    ok(bob_open("memory", "link", args={"from_id": public, "to_id": private}))

    seen_by_bob = ok(bob("memory", "history", args={"id": public})) | ok(bob("memory", "graph", args={"id": public}))
    assert private not in json.dumps(seen_by_bob)
    assert [e["event"] for e in seen_by_bob["events"]] == ["created"]
    assert private in json.dumps(ok(ada("memory", "history", args={"id": public})))


def test_only_the_lease_holder_may_change_a_claimed_task_while_its_lease_is_valid(
        as_agent: Callable[..., Agent]) -> None:
    lead, worker = as_agent("lead"), as_agent("worker")
    task = ok(lead("task", "create", args={"title": "Rotate the keys"}))
    claimed = ok(worker("task", "claim", args={"lease": 600}))["task"]
    assert claimed["id"] == task["id"]
    for tool, extra in (("update", {"state": "cancelled"}), ("set_result", {"note": "done by lead"}),
                        ("delete", {})):
        error = refused(lead("task", tool, args={"id": task["id"], "version": claimed["version"], **extra}))
        assert (error["code"], error["details"]["owner"]) == ("lease_held", "worker"), tool
    done = ok(worker("task", "update", args={"id": task["id"], "version": claimed["version"], "state": "completed"}))
    assert (done["state"], done["owner"]) == ("completed", "worker")


def test_with_isolation_off_another_agent_reads_a_private_memory_but_cannot_change_it(
        as_agent: Callable[..., Agent]) -> None:
    ada, bob = as_agent("ada", isolation_enforce="false"), as_agent("bob", isolation_enforce="false")
    private = ok(ada("memory", "write", args={"content": "The staging database is db-7."}))["id"]
    assert ok(bob("memory", "get", args={"id": private}))["content"] == "The staging database is db-7."
    for argv, args in ((("memory", "update"), {"id": private, "content": "The staging database is db-8."}),
                       (("memory", "supersede"), {"id": private, "content": "Staging moved to db-9."}),
                       (("memory", "delete"), {"id": private}),
                       (("memory", "pin"), {"id": private})):
        assert refused(bob(*argv, args=args))["code"] == "not_found", argv
    record = ok(ada("memory", "get", args={"id": private}))
    assert (record["content"], record["retired_at"], record["pinned"]) == ("The staging database is db-7.", None,
                                                                          False)
    assert ok(ada("memory", "update", args={"id": private, "importance": 0.9}))["importance"] == 0.9
