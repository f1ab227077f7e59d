"""The Sync actor: one per store, it syncs a SQLite store with its PostgreSQL warehouse (docs/sync.md).

A run: switch capture on (once), settle what an interrupted run left (the warehouse's mark of this node's
outbox), stamp the noted changes, push the outbox in batches, pull the warehouse's changes in batches, copy the
conflict log, and record the run. Every local step is a Writer request (one writer per store) and every push
batch is one warehouse transaction that carries its own mark, so a run stopped anywhere (kill -9, the warehouse
gone mid-batch) resumes with nothing lost and nothing applied twice; a failed batch is retried by the next run,
never skipped. Runs come from ``m3 sync now`` and, in a long-running engine, every ``sync.interval_s``.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, cast

from sqlalchemy import Connection

from m3.actors.reader import ConnectionOwner
from m3.actors.supervisor import ActorHandle
from m3.errors import ConfigError, M3Error, SyncNotConfigured
from m3.protocols.base import Message
from m3.protocols.messages import sync as sy
from m3.store import sync_reads, sync_state
from m3.store.sync_tables import BY_NAME
from m3.store.warehouse import Warehouse

log = logging.getLogger(__name__)


def now_ms() -> int:
    return int(time.time() * 1000)


def chosen_tables(names: list[str]) -> tuple[str, ...] | None:
    """The ``sync.tables`` setting checked: None for every table; ConfigError naming an unknown one."""
    if not names:
        return None
    unknown = sorted(set(names) - set(BY_NAME))
    if unknown:
        raise ConfigError(f"sync.tables names tables that do not sync: {', '.join(unknown)}",
                          hint=f"Name some of: {', '.join(BY_NAME)} (docs/sync.md).")
    return tuple(names)


class SyncActor(ConnectionOwner):
    def __init__(self, options: Any, *, writer: ActorHandle, url: str, interval_s: float, batch: int,
                 tables: tuple[str, ...] | None, background: bool, ask_timeout: float, **base: Any):
        super().__init__(options, **base)
        self._writer = writer
        self._url = url
        self._interval_s = max(1.0, interval_s)
        self._batch = max(1, batch)
        self._tables = tables
        self._background = background and bool(url)
        self._ask_timeout = ask_timeout
        self._warehouse: Warehouse | None = None
        self._timer: threading.Timer | None = None
        self.last: dict[str, Any] | None = None

    def setup(self) -> None:
        # The store connection opens on first use: most stores never sync, and each engine's connections count.
        if self._background:
            self._arm(0.0)

    def _local(self) -> Connection:
        if self._conn is None:
            super().setup()
        return self.conn

    def release(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self._warehouse is not None:
            self._warehouse.close()
            self._warehouse = None
        super().release()

    def handlers(self) -> dict[type[Message], Callable[[Any], Any]]:
        return {sy.RunSync: self._run, sy.SyncTick: self._tick, sy.SyncStatusOf: self._status,
                sy.SyncLogOf: self._log}

    def _arm(self, delay: float) -> None:
        self._timer = threading.Timer(delay, self.tell_self, args=(sy.SyncTick(),))
        self._timer.daemon = True
        self._timer.start()

    def _tick(self, _msg: sy.SyncTick) -> None:
        try:
            self._run(sy.RunSync(trigger="schedule"))
        except M3Error as exc:
            log.warning("scheduled sync failed (%s); the next one resumes", exc.message)
        finally:
            self._arm(self._interval_s)

    def _wh(self) -> Warehouse:
        if self._warehouse is None:
            self._warehouse = Warehouse(self._url)
        return self._warehouse

    def _ask(self, request: Any) -> Any:
        return self._writer.ask(request, max(self._ask_timeout, 600.0))

    # -- one run -----------------------------------------------------------------------------------------------

    def _run(self, msg: sy.RunSync) -> sy.SyncReport:
        if not self._url:
            raise SyncNotConfigured("sync_now has no warehouse to sync with: sync.warehouse_url is empty")
        started, clock = datetime.now(UTC), time.perf_counter()
        report: dict[str, Any] = {"node": "", "trigger": msg.trigger, "pushed": 0, "pulled": 0, "conflicts": 0,
                                  "skipped": 0, "seconds": 0.0, "bytes_sent": 0, "bytes_received": 0}
        error: str | None = None
        try:
            report["node"] = self._ask(sy.EnableSync(now_ms=now_ms()))["node"]
            self._push(report)
            self._pull(report)
        except M3Error as exc:
            error = exc.message
            raise
        finally:
            report["seconds"] = round(time.perf_counter() - clock, 3)
            self.last = {**report, "error": error, "at": started.isoformat()}
            self._record(report, started, error)
        return cast(sy.SyncReport, report)

    def _record(self, report: dict[str, Any], started: datetime, error: str | None) -> None:
        run = {"started_at": started, "finished_at": datetime.now(UTC), "trigger": report["trigger"],
               "pushed": report["pushed"], "pulled": report["pulled"], "conflicts": report["conflicts"],
               "error": error}
        try:
            self._ask(sy.RecordRun(run=run))
        except M3Error as exc:  # the run's own outcome matters more than its log line
            log.warning("could not record the sync run (%s)", exc.message)

    def _push(self, report: dict[str, Any]) -> None:
        node, wh = report["node"], self._wh()
        if self._ask(sy.MeetWarehouse(warehouse=wh.identity(), now_ms=now_ms())):
            log.warning("this store syncs with a new warehouse: sending everything and pulling from the start")
        upto, ahead = wh.node(node)
        self._ask(sy.ConfirmPush(node=node, upto=upto, ahead=tuple(ahead)))  # what an interrupted run sent
        self._ask(sy.StageChanges(tables=self._tables))
        after = 0
        while True:
            with self._local().begin():
                batch, top = sync_reads.outbox_batch(self._local(), node, after=after, limit=self._batch)
            if not batch:
                return
            send = [v for v in batch if self._tables is None or v["tbl"] in self._tables]
            report["bytes_sent"] += len(json.dumps(send, default=str))
            done = wh.push(node, send, upto=top)
            self._ask(sy.ConfirmPush(node=node, upto=top, ahead=tuple(v["seq"] for v in batch if v["seq"] > top)))
            report["pushed"] += done.applied
            report["skipped"] += done.skipped
            report["conflicts"] += done.conflicts
            after = top

    def _pull(self, report: dict[str, Any]) -> None:
        node, wh = report["node"], self._wh()
        with self._local().begin():
            mark = int(sync_state.get(self._local(), "pulled", 0))
        arrived: list[str] = []
        while True:
            got, top = wh.pull(mark, self._batch, node=node)
            if top == mark:
                break
            report["bytes_received"] += len(json.dumps([v["data"] for v in got], default=str))
            wanted = [_wire(v) for v in got if self._tables is None or v["tbl"] in self._tables]
            parents = self._parents_of(wanted)
            done = self._ask(sy.ApplyPulled(versions=tuple(parents + wanted), watermark=top, now_ms=now_ms()))
            report["pulled"] += done["applied"]
            arrived += done["memories"]
            mark = top
        if arrived:
            self._ask(sy.SettlePulled(ids=tuple(dict.fromkeys(arrived))))
        with self._local().begin():
            seen = max((c["wid"] for c in sync_reads.conflicts(self._local(), 1)), default=0)
        while True:
            entries = wh.conflicts_after(seen, self._batch)
            if not entries:
                break
            self._ask(sy.RecordConflicts(entries=tuple(entries)))
            seen = max(e["id"] for e in entries)
        wh.pulled(node)

    def _parents_of(self, versions: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Rows the batch's rows name as parents that this store lacks, fetched from the warehouse (a parent
        changed after its child has a later place in the warehouse's order)."""
        found: list[dict[str, Any]] = []
        level = versions
        for _ in range(64):  # a chain of parent tasks is the deepest case
            with self._local().begin():
                missing = sync_reads.missing_parents(self._local(), level + found)
            missing = {t: keys - {v["key"] for v in found if v["tbl"] == t} for t, keys in missing.items()}
            fetched = [_wire(v) for t, keys in missing.items() if keys for v in self._wh().fetch(t, sorted(keys))]
            if not fetched:
                break
            found = fetched + found
            level = fetched
        return found

    # -- status and log ----------------------------------------------------------------------------------------

    def _status(self, _msg: sy.SyncStatusOf) -> dict[str, Any]:
        with self._local().begin():
            local = sync_reads.status(self._local())
            latest = sync_reads.runs(self._local(), 1)
        out: dict[str, Any] = {"configured": bool(self._url), "interval_s": self._interval_s,
                               "background": self._background, "tables": list(self._tables or BY_NAME),
                               **local, "last_run": _plain(latest[0]) if latest else None, "warehouse": None,
                               "warehouse_error": None}
        if self._url:
            try:
                out["warehouse"] = self._wh().summary()
            except M3Error as exc:
                out["warehouse_error"] = exc.message
        return out

    def _log(self, msg: sy.SyncLogOf) -> dict[str, Any]:
        with self._local().begin():
            return {"runs": [_plain(r) for r in sync_reads.runs(self._local(), msg.limit)],
                    "conflicts": [_plain(c) for c in sync_reads.conflicts(self._local(), msg.limit)]}


def _wire(v: dict[str, Any]) -> dict[str, Any]:
    return {"tbl": v["tbl"], "key": v["key"], "hlc": int(v["hlc"]), "origin": v["origin"],
            "deleted": bool(v["deleted"]), "data": v["data"]}


def _plain(row: dict[str, Any]) -> dict[str, Any]:
    return {k: (v.isoformat() if isinstance(v, datetime) else v) for k, v in row.items()}
