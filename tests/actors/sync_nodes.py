"""Nodes for warehouse-sync tests: SQLite stores of their own, each with its actors, and table dumps to compare."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, select
from sqlalchemy.pool import NullPool

from m3.actors.system import ActorSystem
from m3.config import load_config
from m3.embed.minilm import MiniLMEmbedder
from m3.gateway.registry import default_registry
from m3.gateway.service import Service
from m3.protocols.messages.sync import RunSync, SyncReport
from m3.store.sync_tables import SYNCED
from m3.store.warehouse import Warehouse
from tests.helpers import call


def node_env(root: Path, name: str, warehouse_url: str, **extra: str) -> dict[str, str]:
    """The environment of one node: its own M3_HOME and SQLite file, the shared warehouse."""
    home = root / name
    values = {k: v for k, v in os.environ.items() if not k.startswith("M3_")}
    values.update({"M3_HOME": str(home), "M3_STORE_URL": f"sqlite:///{home / 'm3.db'}",
                   "M3_SYNC_WAREHOUSE_URL": warehouse_url, "M3_SYNC_BATCH": "7",
                   "M3_IDENTITY_AGENT_ID": name, **extra})
    return values


class Node:
    """One machine: a SQLite store, its actors and a service to call tools through."""

    def __init__(self, env: dict[str, str], embedder: MiniLMEmbedder):
        self.env = env
        self.url = env["M3_STORE_URL"]
        self.config = load_config(env)
        self.system = ActorSystem(self.config, embedder, background=False).start()
        self.service = Service(self.config, self.system, default_registry())

    def call(self, tool: str, **args: Any) -> dict[str, Any]:
        return call(self.service, tool, **args)

    def sync(self) -> SyncReport:
        report: SyncReport = self.system.sync.ask(RunSync(), 120)
        return report

    def settle(self) -> None:
        self.system.wait_embedded(60)

    def stop(self) -> None:
        self.system.stop(drain_embeddings=False)


def sync_until_quiet(machines: list[Node] | tuple[Node, ...], rounds: int = 6) -> None:
    """Let each node finish its vectors and sync, round after round, until a round moves nothing (an erasure or
    an orphan arriving may make a node push deletions back); AssertionError if ``rounds`` are not enough."""
    for _ in range(rounds):
        moved = 0
        for node in machines:
            node.settle()
            report = node.sync()
            moved += report["pushed"] + report["pulled"]
        if moved == 0:
            return
    raise AssertionError(f"the stores did not settle after {rounds} rounds of syncs")


@contextmanager
def nodes(root: Path, warehouse_url: str, embedder: MiniLMEmbedder, *names: str) -> Iterator[list[Node]]:
    started: list[Node] = []
    try:
        for name in names:
            started.append(Node(node_env(root, name, warehouse_url), embedder))
        yield started
    finally:
        for node in started:
            node.stop()


def dump(url: str) -> dict[str, list[str]]:
    """Every synced table of a store, its travelling columns only, rows sorted (to compare stores exactly)."""
    engine = create_engine(url, poolclass=NullPool)
    out: dict[str, list[str]] = {}
    try:
        with engine.connect() as conn:
            for spec in SYNCED:
                found = conn.execute(select(spec.table)).mappings()
                out[spec.name] = sorted(_line(spec.encode(row)) for row in found)
    finally:
        engine.dispose()
    return out


def warehouse_dump(url: str) -> dict[str, list[str]]:
    wh = Warehouse(url)
    try:
        tables = wh.dump()
    finally:
        wh.close()
    return {spec.name: sorted(_line(spec.encode(row)) for row in tables.get(spec.name, [])) for spec in SYNCED}


def _line(data: dict[str, Any]) -> str:
    import json

    return json.dumps(data, sort_keys=True, default=str)
