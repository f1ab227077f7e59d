"""The EntityIndexer: finds the entities of new memories in the background, and answers the entity reads.

Never on the write path: memory_write commits without it. On each tick (``entities.interval_s``) it reads the
memories after its watermark, at most ``entities.batch`` of them, extracts their mentions and relations
(:mod:`m3.cognition.extraction`, pure and deterministic) and hands them to the Writer as one
:class:`IndexEntities`, which also moves the watermark. With them go the memories the store noted for a second
reading (``entity_stale``: changed in place, retired or restored, noted by a trigger, migration 0017): what they
mentioned is dropped and the current ones indexed anew. A full batch queues the next one behind the messages
waiting (reads are never stuck behind a whole backlog); otherwise the next tick is armed. ``entity_extract``
runs the same pass at once (:class:`ExtractEntities`).

Ticks run only in long-running processes and, on a store several engines share, only in the engine holding the
background lease (:class:`TakeBackground`); one-shot commands and other engines index only when asked. The
ticker is injectable, so tests fire ticks themselves instead of sleeping.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, Protocol

from m3.actors.reader import ConnectionOwner
from m3.actors.supervisor import ActorHandle
from m3.cognition.extraction import Extraction, Extractor
from m3.protocols.base import Message
from m3.protocols.messages import entities as msg
from m3.protocols.tools import entities as p
from m3.store import entities as reads
from m3.store import entity_graph, entity_lists
from m3.store.engine import StoreOptions

log = logging.getLogger(__name__)

COUNTS = ("memories", "mentions", "relations", "entities_created", "dropped_mentions", "dropped_entities")


class Ticker(Protocol):
    """Calls ``fire`` once, ``delay_s`` from now, unless cancelled (a timer thread; tests fire it by hand)."""

    def arm(self, delay_s: float, fire: Callable[[], None]) -> None: ...

    def cancel(self) -> None: ...


class ThreadTicker:
    """The real :class:`Ticker`: one daemon ``threading.Timer`` at a time."""

    def __init__(self) -> None:
        self._timer: threading.Timer | None = None

    def arm(self, delay_s: float, fire: Callable[[], None]) -> None:
        self.cancel()
        self._timer = threading.Timer(max(0.0, delay_s), fire)
        self._timer.daemon = True
        self._timer.start()

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


class IndexTick(Message):
    """Time for the next batch of the backlog."""


class TakeBackground(Message):
    """From now on this process indexes in the background (it took the background lease of a shared store)."""


def _found(memory: dict[str, Any], found: Extraction) -> msg.IndexedMemory:
    at = {m: i for i, m in enumerate(found.mentions)}
    return msg.IndexedMemory(
        memory_id=memory["id"], scope=memory["scope"], agent_id=memory["agent_id"], user_id=memory["user_id"],
        valid_from=memory["valid_from"], valid_to=memory["valid_to"],
        mentions=tuple(msg.FoundMention(name=m.name, type=m.type, start=m.start, end=m.end, surface=m.surface)
                       for m in found.mentions),
        relations=tuple(msg.FoundRelation(subject=at[f.subject], predicate=f.predicate, object=at[f.object])
                        for f in found.relations if f.subject in at and f.object in at))


class EntityIndexer(ConnectionOwner):
    def __init__(self, options: StoreOptions, *, writer: ActorHandle, extractor: Extractor, batch: int,
                 interval_s: float, background: bool, ask_timeout: float, ticker: Ticker | None = None, **base: Any):
        super().__init__(options, **base)
        self._writer = writer
        self._extractor = extractor
        self._batch = max(1, batch)
        self._interval_s = max(0.05, interval_s)
        self._background = background
        self._ask_timeout = ask_timeout
        self._ticker: Ticker = ticker or ThreadTicker()
        self.last_error: str | None = None

    def setup(self) -> None:
        super().setup()
        if self._background:
            self.tell_self(IndexTick())

    def release(self) -> None:
        self._ticker.cancel()
        super().release()

    def handlers(self) -> dict[type[Message], Callable[[Any], Any]]:
        return {IndexTick: self._tick, TakeBackground: self._take_background, msg.ExtractEntities: self._extract,
                msg.SearchEntities: self._search, msg.ListEntities: self._list, msg.GetEntity: self._get,
                msg.EntityGraphOf: self._graph, msg.ListRelations: self._relations}

    # -- the pass --------------------------------------------------------------------------------------

    def _take_background(self, _msg: TakeBackground) -> bool:
        if not self._background:
            self._background = True
            self.tell_self(IndexTick())
        return True

    def _tick(self, _msg: IndexTick) -> None:
        if not self._background:
            return
        try:
            done = self._pass(self._batch)
        except Exception as exc:  # logged, and tried again at the next tick: a tick has nobody to answer
            self.last_error = repr(exc)
            log.warning("entity indexing failed, trying again in %g s: %r", self._interval_s, exc)
            done = {"memories": 0, "notes": 0}
        if self._full(done, self._batch):
            self.tell_self(IndexTick())  # more waits: next batch behind the messages queued meanwhile
        else:
            self._ticker.arm(self._interval_s, lambda: self.tell_self(IndexTick()))

    @staticmethod
    def _full(done: dict[str, int], budget: int) -> bool:
        """Whether a pass used its whole budget of the backlog or of the notes (so more may wait)."""
        return done["memories"] >= budget or done["notes"] >= budget

    def _pass(self, budget: int) -> dict[str, int]:
        """Index at most ``budget`` memories after the watermark, and read again at most ``budget`` memories the
        store noted (changed in place, retired or restored: ``entity_stale``); counts, ``notes`` the notes read."""
        with self.conn.begin():
            after = reads.watermark(self.conn)
            page = reads.backlog(self.conn, after, budget)
            notes = reads.stale(self.conn, budget)
        if not page and not notes:
            return dict.fromkeys((*COUNTS, "notes"), 0)
        current = {row["id"]: row for row in page if row["retired_at"] is None}
        current.update((row["id"], row) for row in notes if row["id"] is not None and row["retired_at"] is None)
        found = tuple(_found(row, self._extractor.extract(reads.indexed_text(row["title"], row["content"])))
                      for row in current.values())
        mark = max((row["seq"] for row in page), default=after)
        counts = self._writer.ask(msg.IndexEntities(
            memories=found, watermark=mark, again=tuple(row["memory_id"] for row in notes),
            notes=tuple(row["note"] for row in notes)), self._ask_timeout)
        self.last_error = None
        seen = {row["id"] for row in page}
        looked_at = len(page) + len({row["memory_id"] for row in notes} - seen)
        return {**counts, "memories": looked_at, "notes": len(notes)}

    def _extract(self, ask: msg.ExtractEntities) -> p.EntityExtractResult:
        total = dict.fromkeys(COUNTS, 0)
        left = ask.limit
        while left is None or left > 0:
            budget = self._batch if left is None else min(left, self._batch)
            done = self._pass(budget)
            for key in COUNTS:
                total[key] += done[key]
            if left is not None:
                left -= done["memories"]
            if not self._full(done, budget):
                break
        with self.conn.begin():
            remaining = reads.backlog_size(self.conn, reads.watermark(self.conn)) + reads.stale_size(self.conn)
        return p.EntityExtractResult(**total, remaining=remaining)

    # -- reads: each in one read transaction -----------------------------------------------------------

    def _read(self, fn: Callable[[], Any]) -> Any:
        with self.conn.begin():
            return fn()

    def _search(self, ask: msg.SearchEntities) -> p.EntityListResult:
        found = self._read(lambda: reads.search(self.conn, ask.query, ask.type, ask.limit, ask.filter))
        return p.EntityListResult(count=len(found), items=[p.summary(row) for row in found])

    def _list(self, ask: msg.ListEntities) -> p.EntityListResult:
        found = self._read(lambda: entity_lists.list_entities(self.conn, ask.type, ask.limit, ask.offset, ask.filter))
        return p.EntityListResult(count=len(found), items=[p.summary(row) for row in found])

    def _get(self, ask: msg.GetEntity) -> p.EntityDetails:
        def read() -> p.EntityDetails:
            entity, merged_from = reads.resolve(self.conn, ask.id, ask.filter)
            mentions = reads.mentions(self.conn, entity["id"], ask.mention_limit, ask.filter)
            relations = reads.relations(self.conn, ask.filter, entity_ids=[entity["id"]], limit=p.MAX_ENTITY_PAGE)
            return p.EntityDetails(**p.summary(entity).model_dump(), merged_from=merged_from,
                                   mention_list=[p.MentionRecord(**m) for m in mentions],
                                   relations=[p.RelationRecord(**r) for r in relations])
        result: p.EntityDetails = self._read(read)
        return result

    def _graph(self, ask: msg.EntityGraphOf) -> p.EntityGraphResult:
        def read() -> p.EntityGraphResult:
            root, _ = reads.resolve(self.conn, ask.id, ask.filter)
            nodes, edges, truncated = entity_graph.neighbourhood(
                self.conn, root["id"], depth=ask.depth, max_nodes=ask.max_nodes, co_mentions=ask.co_mentions,
                flt=ask.filter)
            shown = reads.summaries(self.conn, nodes, ask.filter)
            return p.EntityGraphResult(
                root=root["id"], truncated=truncated,
                nodes=[p.GraphNode(**p.summary(shown[i]).model_dump(), depth=d)
                       for i, d in nodes.items() if i in shown],
                edges=[p.GraphEdge(**edge) for edge in edges if edge["source"] in shown and edge["target"] in shown])
        result: p.EntityGraphResult = self._read(read)
        return result

    def _relations(self, ask: msg.ListRelations) -> p.EntityRelationsResult:
        def read() -> list[dict[str, Any]]:
            ids = None
            if ask.entity_id is not None:
                ids = [reads.resolve(self.conn, ask.entity_id, ask.filter)[0]["id"]]
            return reads.relations(self.conn, ask.filter, entity_ids=ids, predicate=ask.predicate, limit=ask.limit)
        found = self._read(read)
        return p.EntityRelationsResult(count=len(found), items=[p.RelationRecord(**r) for r in found])

