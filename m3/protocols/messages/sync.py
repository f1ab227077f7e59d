"""Messages of warehouse sync: to the Sync actor (run, status, log) and the node-side writes it asks the Writer for."""

from __future__ import annotations

from typing import Any, TypedDict

from m3.protocols.base import Message, Request


class SyncReport(TypedDict):
    """What one sync run did."""

    node: str
    trigger: str
    pushed: int
    pulled: int
    conflicts: int
    skipped: int
    seconds: float
    bytes_sent: int
    bytes_received: int


class RunSync(Request[SyncReport]):
    """Push what changed here, then pull what changed elsewhere (to the Sync actor)."""

    trigger: str = "manual"


class SyncTick(Message):
    """The schedule fired (``sync.interval_s``)."""


class SyncStatusOf(Request[dict[str, Any]]):
    """The node's sync state, and the warehouse's when it answers (to the Sync actor)."""


class SyncLogOf(Request[dict[str, Any]]):
    """The latest runs and conflicts (to the Sync actor)."""

    limit: int = 20


# -- to the Writer ---------------------------------------------------------------------------------------------

class EnableSync(Request[dict[str, Any]]):
    """Switch capture on (once) and reply ``{"node": id, "noted": rows noted now}``."""

    now_ms: int


class MeetWarehouse(Request[int]):
    """Record the warehouse's id; a different one than before: start over with it (reply the rows noted)."""

    warehouse: str
    now_ms: int


class StageChanges(Request[int]):
    """Stamp the noted changes (of ``tables``, or all) into the outbox; reply how many versions."""

    tables: tuple[str, ...] | None = None


class ConfirmPush(Request[int]):
    """The warehouse committed this node's outbox up to ``upto`` and the entries ``ahead``."""

    node: str
    upto: int
    ahead: tuple[int, ...] = ()


class ApplyPulled(Request[dict[str, Any]]):
    """Write a pulled batch and move the pull watermark (``None``: parents fetched alone, no watermark)."""

    versions: tuple[dict[str, Any], ...]
    watermark: int | None
    now_ms: int


class SettlePulled(Request[int]):
    """Memories that arrived by sync: those still without a vector of the active model are embedded (quietly)."""

    ids: tuple[str, ...]


class RecordConflicts(Request[int]):
    """Copy the warehouse's conflict log entries (``m3sync_conflicts`` rows) into ``sync_conflicts``."""

    entries: tuple[dict[str, Any], ...]


class RecordRun(Request[int]):
    """One ``sync_runs`` row."""

    run: dict[str, Any]
