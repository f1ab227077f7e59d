"""A sync in a process of its own, for tests that kill it (-9) at a random point: the store's real Writer and
Sync actor, nothing else. ``python -m tests.actors.sync_worker STORE_URL WAREHOUSE_URL BATCH``; prints ``ready``
before the sync starts and the report as JSON when it ends."""

from __future__ import annotations

import json
import sys

from m3.actors.supervisor import ActorHandle
from m3.actors.sync import SyncActor
from m3.actors.writer import Writer
from m3.protocols.messages.sync import RunSync
from m3.retrieval.supersession import SupersessionPolicy
from m3.store.engine import StoreOptions


def main(store_url: str, warehouse_url: str, batch: int) -> None:
    options = StoreOptions(url=store_url)
    writer = ActorHandle("writer", Writer, options, max_batch=64,
                         policy=SupersessionPolicy(threshold=0.97, exempt_types=frozenset()),
                         searcher=None, embedder=None)
    sync = ActorHandle("sync", SyncActor, options, writer=writer, url=warehouse_url, interval_s=3600.0,
                       batch=batch, tables=None, background=False, ask_timeout=60.0)
    writer.start()
    sync.start()
    print("ready", flush=True)
    try:
        report = sync.ask(RunSync(trigger="worker"), 300)
        print(json.dumps(report), flush=True)
    finally:
        sync.stop()
        writer.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
