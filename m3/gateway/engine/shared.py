"""A store several engines share (PostgreSQL, several machines on one database): wake-ups and background work.

* **Wake-ups cross engines**: after a commit that notified agents, the engine sends ``NOTIFY m3_notified``
  with the agents and its own id (the Writer has committed, so a listener reads the new rows); every other
  engine ``LISTEN``s on its own connection and wakes its routers for those agents.
* **One runner per background job**: the embedder's backlog, the entity indexer and the cognitive loop run in the
  engine holding a session-level advisory lock (``pg_try_advisory_lock``); the others try again every
  ``engine.lease_retry_s``. A holder that dies loses its connection and with it the lock, so another engine
  takes over within that bound.

Whether a store is shared is the dialect's ``serial_writes`` (False: several writers may run at once).
"""

from __future__ import annotations

import contextlib
import json
import logging
import queue
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from m3.config import Config
from m3.store.dialect import dialect_for
from m3.store.engine import StoreOptions, open_engine

log = logging.getLogger(__name__)

CHANNEL = "m3_notified"
#: Advisory-lock class of m3's background leases (two-key form: apart from the single-key locks of writes).
LEASE_CLASS = 0x6D33
JOBS = {"embedder": 1}
_PAYLOAD_AGENTS = 100  # agents per NOTIFY (its payload is limited to 8000 bytes)


def shared_store(config: Config) -> bool:
    return not dialect_for(config.store_url).serial_writes


def _raw(options: StoreOptions) -> Any:
    """A psycopg connection of its own, in autocommit (LISTEN, NOTIFY and session advisory locks)."""
    engine = open_engine(options, "reader")
    raw: Any = engine.raw_connection().driver_connection
    raw.autocommit = True
    return raw


class CrossEngineWake:
    """NOTIFY after local commits; LISTEN for the other engines' and wake the local routers."""

    def __init__(self, options: StoreOptions, wake: Callable[[tuple[str, ...]], None]):
        self._options = options
        self._wake = wake
        self.engine_id = uuid.uuid4().hex
        self._outbox: queue.SimpleQueue[tuple[str, ...] | None] = queue.SimpleQueue()
        self._stopping = threading.Event()
        self._listening = threading.Event()
        self.received = 0

    def start(self) -> CrossEngineWake:
        threading.Thread(target=self._listen, daemon=True, name="m3-pg-listen").start()
        threading.Thread(target=self._publish, daemon=True, name="m3-pg-notify").start()
        self._listening.wait(10.0)
        return self

    def notified(self, agents: tuple[str, ...]) -> None:
        """The Writer's hook: queue a NOTIFY (sent by the publisher thread, so the Writer never waits)."""
        self._outbox.put(agents)

    def stop(self) -> None:
        self._stopping.set()
        self._outbox.put(None)

    def _publish(self) -> None:
        conn = None
        while True:
            agents = self._outbox.get()
            if agents is None:
                break
            try:
                conn = conn or _raw(self._options)
                for start in range(0, len(agents), _PAYLOAD_AGENTS):
                    chunk = list(agents[start:start + _PAYLOAD_AGENTS])
                    payload = json.dumps({"from": self.engine_id, "agents": chunk})
                    conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, payload))
            except Exception as exc:  # the database is away: the local routers are woken anyway
                log.warning("could not tell other engines about a notification: %s", exc)
                conn = None
        if conn is not None:
            conn.close()

    def _listen(self) -> None:
        while not self._stopping.is_set():
            try:
                conn = _raw(self._options)
                conn.execute(f"LISTEN {CHANNEL}")
                self._listening.set()
                try:
                    while not self._stopping.is_set():
                        for note in conn.notifies(timeout=1.0):
                            self._arrived(note.payload)
                finally:
                    conn.close()
            except Exception as exc:
                self._listening.set()
                log.warning("listening for other engines' notifications failed (%s); again in 1 s", exc)
                self._stopping.wait(1.0)

    def _arrived(self, payload: str) -> None:
        try:
            data = json.loads(payload)
        except ValueError:
            return
        if data.get("from") == self.engine_id:
            return  # ours: the local routers were woken on commit
        self.received += 1
        self._wake(tuple(str(a) for a in data.get("agents", [])))


class BackgroundLease:
    """The lease of one background job on a shared store; ``on_taken`` runs once, when this engine gets it."""

    def __init__(self, options: StoreOptions, job: str, retry_s: float, on_taken: Callable[[], None]):
        self._options = options
        self.job = job
        self._retry_s = max(0.05, retry_s)
        self._on_taken = on_taken
        self._stopping = threading.Event()
        self.held = False
        self._conn: Any = None

    def try_take(self) -> bool:
        """One attempt; True when this engine holds the lease (now or already)."""
        if self.held:
            return True
        try:
            self._conn = self._conn or _raw(self._options)
            row = self._conn.execute("SELECT pg_try_advisory_lock(%s, %s)", (LEASE_CLASS, JOBS[self.job])).fetchone()
        except Exception as exc:
            log.warning("could not try the %s lease: %s", self.job, exc)
            self._conn = None
            return False
        self.held = bool(row and row[0])
        return self.held

    def start(self) -> BackgroundLease:
        """Keep trying in a thread until held (``on_taken`` then), unless held already."""
        if not self.held:
            threading.Thread(target=self._keep_trying, daemon=True, name=f"m3-lease-{self.job}").start()
        return self

    def _keep_trying(self) -> None:
        while not self._stopping.wait(self._retry_s):
            if self.try_take():
                log.info("this engine took the %s lease", self.job)
                self._on_taken()
                return

    def stop(self) -> None:
        self._stopping.set()
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()  # the session ends: the lock is released for another engine
            self._conn = None


class SharedWork:
    """On a store several engines share: the cross-engine wake and the background lease (else nothing)."""

    def __init__(self, config: Config):
        from m3.actors.system import store_options

        self.config = config
        self.shared = shared_store(config)
        self.options = store_options(config)
        self.lease: BackgroundLease | None = None
        self.wake: Any = None
        self._system: Any = None
        if self.shared:
            self.lease = BackgroundLease(self.options, "embedder", config["engine.lease_retry_s"], self._taken)
            self.lease.try_take()

    @property
    def background(self) -> bool:
        return self.lease.held if self.lease is not None else True

    def _taken(self) -> None:
        from m3.actors.embedder import TakeBackground
        from m3.actors.entity_indexer import TakeBackground as IndexInBackground
        from m3.actors.loop import TakeBackground as LoopInBackground

        if self._system is not None:
            self._system.embedder.tell(TakeBackground())
            # One lease for all background work: the same engine indexes entities (if entities.enabled).
            if self.config["entities.enabled"]:
                self._system.entities.tell(IndexInBackground())
            if self.config["loop.enabled"]:  # and runs the cognitive loop
                self._system.observer.tell(LoopInBackground())
                self._system.reflector.tell(LoopInBackground())

    def attach(self, system: Any) -> None:
        self._system = system
        if not self.shared:
            return
        assert self.lease is not None
        self.lease.start()
        self.wake = CrossEngineWake(self.options, system.routers.arrived).start()
        system.notified_hooks.append(self.wake.notified)

    def status(self) -> dict[str, Any]:
        return {"shared_store": self.shared, "background": {"embedder": self.background},
                "wakes_from_other_engines": self.wake.received if self.wake is not None else 0}

    def close(self) -> None:
        if self.wake is not None:
            self.wake.stop()
        if self.lease is not None:
            self.lease.stop()


@contextmanager
def shared_store_work(config: Config) -> Iterator[SharedWork]:
    work = SharedWork(config)
    try:
        yield work
    finally:
        work.close()  # after the actors stopped: the lease is let go once the backlog work has ended
