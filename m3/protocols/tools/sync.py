"""Arguments, results and declarations of the ``sync`` domain: warehouse sync on demand, its state and its log
(docs/sync.md).

A SQLite store syncs both ways with a PostgreSQL warehouse (``sync.warehouse_url``, kept in the vault) every
``sync.interval_s`` in a running engine; these tools run a sync now and show what the runs did.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from m3.protocols.base import ToolArgs, ToolResult, ToolSpec
from m3.protocols.tools.meta import NoArgs


class SyncNowResult(ToolResult):
    node: str = Field(description="This store's node id (the origin its changes carry).")
    trigger: str
    pushed: int = Field(description="Row versions the warehouse took from this store.")
    pulled: int = Field(description="Row versions written here from the warehouse.")
    conflicts: int = Field(description="Rows both sides changed since they last agreed; resolved at the "
                                       "warehouse, the losing version kept in the conflict log (sync_log).")
    skipped: int = Field(description="Versions the warehouse already held (a resumed run) or that lost.")
    seconds: float
    bytes_sent: int = Field(description="Size of the rows pushed, as JSON.")
    bytes_received: int = Field(description="Size of the rows pulled, as JSON.")


SYNC_NOW = ToolSpec(
    name="sync_now", domain="sync", args=NoArgs, result=SyncNowResult,
    description=(
        "Sync this store with its warehouse now: push every change made here since the last sync, then pull "
        "every change other machines pushed. Safe to run at any time and to interrupt: the next run resumes "
        "without losing or repeating anything. Use it before switching machines, or after a long offline spell."
    ),
)


class SyncStatusResult(ToolResult):
    configured: bool = Field(description="sync.warehouse_url is set.")
    background: bool = Field(description="This process syncs every interval_s (a running engine with a warehouse).")
    interval_s: float
    tables: list[str] = Field(description="The tables that sync (sync.tables).")
    node: str | None = Field(description="This store's node id, once it synced.")
    capture: bool = Field(description="Changes are being noted for the next push (on since the first sync).")
    pulled: int = Field(description="The warehouse position this store has pulled up to.")
    waiting: int = Field(description="Changes noted here and not yet pushed.")
    conflicts: int = Field(description="Conflicts in the local copy of the conflict log.")
    clock: int = Field(description="This node's hybrid logical clock (milliseconds << 16 | counter).")
    last_run: dict[str, Any] | None = Field(description="The latest run: when, why, counts, error.")
    warehouse: dict[str, Any] | None = Field(description="The warehouse's live rows, tombstones, position and "
                                                         "nodes, when it answered.")
    warehouse_error: str | None = Field(description="Why the warehouse did not answer, or None.")


SYNC_STATUS = ToolSpec(
    name="sync_status", domain="sync", args=NoArgs, result=SyncStatusResult, read_only=True,
    description=(
        "Show whether this store syncs with a warehouse, what waits to be pushed, how far it has pulled, the "
        "latest run and the warehouse's own counts. Use it to check that machines are in step."
    ),
)


class SyncLogArgs(ToolArgs):
    limit: int = Field(20, ge=1, le=1000, description="Most runs and conflicts to return, newest first.")


class SyncLogResult(ToolResult):
    runs: list[dict[str, Any]] = Field(description="Sync runs, newest first: started_at, finished_at, trigger, "
                                                   "pushed, pulled, conflicts, error.")
    conflicts: list[dict[str, Any]] = Field(description="Resolved conflicts, newest first: the table and key, the "
                                                        "winning and the losing version (hlc, origin) and the losing "
                                                        "row's columns.")


SYNC_LOG = ToolSpec(
    name="sync_log", domain="sync", args=SyncLogArgs, result=SyncLogResult, read_only=True,
    description=(
        "List the latest sync runs and the conflicts the warehouse resolved, each with the losing version of the "
        "row, which is never dropped. Use it to see why a row has the value it has after two machines changed it."
    ),
)

SYNC_TOOLS: tuple[ToolSpec, ...] = (SYNC_NOW, SYNC_STATUS, SYNC_LOG)
