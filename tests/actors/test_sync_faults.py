"""Warehouse sync under faults: random changes on two machines, syncs killed (-9) at random points, then a final
sync: both stores and the warehouse hold exactly the same rows, nothing lost, nothing twice.

Each seed is one random history. CI runs ``M3_SYNC_SEEDS`` seeds (default 2); a longer run takes more, e.g.
``M3_SYNC_SEEDS=200 python -m pytest tests/actors/test_sync_faults.py`` (README.md, "Longer runs").
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from m3.embed.minilm import MiniLMEmbedder
from m3.errors import M3Error
from m3.store.warehouse import Warehouse
from tests.actors.sync_nodes import Node, dump, nodes, sync_until_quiet, warehouse_dump
from tests.pg import TestCluster

SEEDS = int(os.environ.get("M3_SYNC_SEEDS", "2"))
#: Changes per history, and the share of steps that are syncs.
STEPS = 36
SYNC_SHARE = 0.25
ROOT = Path(__file__).resolve().parents[2]


class History:
    """The random changes of one seed, and what the test knows must (not) be in the stores at the end."""

    def __init__(self, rng: random.Random, machines: list[Node]):
        self.rng = rng
        self.machines = machines
        self.written: dict[str, str] = {}  # memory id -> its user
        self.hard_deleted: set[str] = set()
        self.erased_users: set[str] = set()
        self.tasks: list[tuple[Node, str]] = []
        self._users = 0

    def user(self) -> str:
        # A user once erased is never written for again: new data after an erasure is legitimate data.
        if self._users == 0 or self.rng.random() < 0.3:
            self._users += 1
        return f"u{self.rng.randrange(max(1, self._users - 2), self._users + 1)}"

    def step(self, node: Node) -> None:
        ops: list[Callable[[Node], None]] = [self.write, self.write, self.supersede, self.update, self.soft_delete,
                                             self.hard_delete, self.erase, self.task, self.chat, self.link]
        # Refused with a code (e.g. superseding a memory another machine already retired): fine.
        with contextlib.suppress(M3Error):
            self.rng.choice(ops)(node)

    def _some(self) -> str | None:
        live = sorted(set(self.written) - self.hard_deleted)
        return self.rng.choice(live) if live else None

    def write(self, node: Node) -> None:
        user = self.user()
        while user in self.erased_users:
            user = self.user()
        text = f"{user} note {self.rng.randrange(10**6)} about {self.rng.choice(['tea', 'trains', 'tax', 'tools'])}"
        got = node.call("memory_write", content=text, type="note", scope="org", user_id=user)
        self.written[got["id"]] = user

    def supersede(self, node: Node) -> None:
        old = self._some()
        if old is not None:
            got = node.call("memory_supersede", id=old, content=f"corrected {self.rng.randrange(10**6)}")
            self.written[got["id"]] = self.written[old]

    def update(self, node: Node) -> None:
        old = self._some()
        if old is not None:
            node.call("memory_update", id=old, importance=round(self.rng.random(), 2))

    def soft_delete(self, node: Node) -> None:
        old = self._some()
        if old is not None:
            node.call("memory_delete", id=old)

    def hard_delete(self, node: Node) -> None:
        old = self._some()
        if old is not None:
            node.call("memory_delete", id=old, hard=True, confirm=True)
            self.hard_deleted.add(old)

    def erase(self, node: Node) -> None:
        users = sorted(set(self.written.values()) - self.erased_users)
        if users and self.rng.random() < 0.5:
            user = self.rng.choice(users)
            node.call("gdpr_forget", user_id=user, confirm=True)
            self.erased_users.add(user)

    def task(self, node: Node) -> None:
        if self.tasks and self.rng.random() < 0.5:
            _, task_id = self.rng.choice(self.tasks)
            current = node.call("task_get", id=task_id)
            node.call("task_update", id=task_id, version=current["version"],
                      priority=self.rng.randrange(-5, 6))
        else:
            got = node.call("task_create", title=f"task {self.rng.randrange(10**6)}")
            self.tasks.append((node, got["id"]))

    def chat(self, node: Node) -> None:
        node.call("chatlog_write", conversation_id=f"c{self.rng.randrange(3)}", role="user", scope="org",
                  content=f"turn {self.rng.randrange(10**6)}")

    def link(self, node: Node) -> None:
        a, b = self._some(), self._some()
        if a is not None and b is not None and a != b:
            node.call("memory_link", from_id=a, to_id=b, type="related")


def killed_sync(node: Node, warehouse: str, rng: random.Random, longest: float) -> bool:
    """Run a sync of ``node``'s store in a process of its own and kill it (-9) after a random time; whether it
    was killed before it finished."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "tests.actors.sync_worker", node.url, warehouse, "3"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    assert proc.stdout is not None
    ready = threading.Event()
    threading.Thread(target=lambda: (proc.stdout.readline(), ready.set()), daemon=True).start()  # type: ignore[union-attr]
    assert ready.wait(60), "the sync worker did not start"
    try:
        proc.wait(timeout=rng.uniform(0.0, longest))
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        return False
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
        return True


@pytest.mark.parametrize("seed", range(SEEDS))
def test_random_changes_and_killed_syncs_end_with_every_store_holding_the_same_rows(
        seed: int, tmp_path: Path, pg_cluster: TestCluster, embedder: MiniLMEmbedder) -> None:
    rng = random.Random(seed)
    warehouse = pg_cluster.new_database(migrated=False)
    kills = 0
    try:
        with nodes(tmp_path, warehouse, embedder, "a", "b") as machines:
            history = History(rng, machines)
            for _ in range(STEPS):
                node = rng.choice(machines)
                if rng.random() < SYNC_SHARE:
                    node.settle()
                    if rng.random() < 0.6:
                        kills += killed_sync(node, warehouse, rng, longest=0.4)
                    else:
                        node.sync()
                else:
                    history.step(node)
            sync_until_quiet(machines)
            expected = warehouse_dump(warehouse)
            for node in machines:
                assert dump(node.url) == expected
            _check_contents(history, machines, expected)
            _check_conflict_log(warehouse)
    finally:
        pg_cluster.drop(warehouse)
    print(f"seed {seed}: {kills} syncs killed")


def _check_contents(history: History, machines: list[Node], expected: dict[str, list[str]]) -> None:
    memories = [json.loads(line) for line in expected["memories"]]
    held = {m["id"]: m for m in memories}
    keys = [(m["id"]) for m in memories]
    assert len(keys) == len(set(keys)), "a memory is held twice"
    for memory_id, user in history.written.items():
        gone = memory_id in history.hard_deleted or user in history.erased_users
        assert (memory_id in held) != gone, (memory_id, user, gone)
    erased = [m for m in memories if m["user_id"] in history.erased_users]
    assert erased == [], "an erased user's memory came back"
    # Every current memory has its vector everywhere: written with it, or embedded where it arrived without one.
    vectors = {json.loads(line)["memory_id"] for line in expected["memory_embeddings"]}
    current = {m["id"] for m in memories if m["retired_at"] is None}
    assert current <= vectors, current - vectors


def _check_conflict_log(warehouse: str) -> None:
    """A batch applied twice would log the same losing version twice, or a version losing to itself."""
    wh = Warehouse(warehouse)
    try:
        log = wh.conflicts_after(0, 100_000)
    finally:
        wh.close()
    losers = [(c["tbl"], c["key"], c["loser_hlc"], c["loser_origin"]) for c in log]
    assert len(losers) == len(set(losers)), "a losing version was logged twice"
    assert all((c["loser_hlc"], c["loser_origin"]) != (c["winner_hlc"], c["winner_origin"]) for c in log)
