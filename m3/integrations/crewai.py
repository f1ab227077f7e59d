"""CrewAI: m3 as the storage backend of CrewAI's unified ``Memory`` (extra ``m3-memory[crewai]``).

``m3_memory(client)`` builds ``Memory(storage=M3Storage(client), embedder=storage.embedder, ...)``. Each
CrewAI ``MemoryRecord`` is one current m3 memory owned by the client's agent (give each crew member its
own client, ``client.as_agent(agent.role)``, to write as that role):

- content, importance and source are m3's own fields; scope path, categories, CrewAI metadata, the private
  flag, the source, the record id and its creation time are under ``metadata["crewai"]`` (times naive UTC,
  as CrewAI keeps them);
- the record's token (``cri`` + digest of its id) is its ``conversation_id`` and in its title, with one
  token per prefix of its scope path (``crs`` + digest), so a lookup by id, or the records under a scope,
  are what m3 is asked for (see :mod:`m3.integrations.tokens`);
- ``update`` supersedes the memory (the old text stays in m3's history); ``delete``/``reset`` soft-delete.

CrewAI hands its storage a query *vector*, and m3 searches by text. ``storage.embedder`` embeds with m3's
own model and remembers which text each vector it returned came from; ``search`` asks m3 for that text
(hybrid: keyword and vector legs, m3's ranking and isolation). A vector this embedder did not make is
refused with ``invalid_argument``. Scores are m3's fused relevance (0..1), not cosine.

Offline use: CrewAI's ``Memory`` calls an LLM to infer a record's scope, categories and importance when
``remember`` is not given all three, to consolidate near-duplicates on save, and for ``depth="deep"``
recall. m3 deduplicates and supersedes near-duplicates itself, so ``m3_memory`` turns CrewAI's
consolidation off (``consolidation_threshold=1.0``, its documented switch); pass every field to
``remember`` and recall with ``depth="shallow"``, or give ``m3_memory`` a real ``llm=``. Offline, also set
``CREWAI_TRACING_ENABLED=false``: otherwise crewai waits 5 s per save for a trace span.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from datetime import UTC, datetime
from threading import Lock
from typing import Any, Literal

import anyio.to_thread
from crewai.memory.types import MemoryRecord, ScopeInfo
from crewai.memory.unified_memory import Memory

from m3.errors import InvalidArgument
from m3.integrations.client import M3Client
from m3.integrations.tokens import path_token, prefix_tokens

#: Vectors remembered per embedder (the texts CrewAI may search for next).
MEMO_SIZE = 1024


def scope_parts(scope: str | None) -> list[str]:
    return [part for part in (scope or "/").split("/") if part]


def scope_path(parts: Sequence[str]) -> str:
    return "/" + "/".join(parts)


def record_token(record_id: str) -> str:
    return path_token("cri", [record_id])


class M3Embedder:
    """CrewAI's embedder callable, on m3's model: ``embedder(texts) -> vectors``; remembers vector -> text."""

    def __init__(self, client: M3Client, size: int = MEMO_SIZE):
        self.client = client
        self.size = size
        self._texts: OrderedDict[tuple[float, ...], str] = OrderedDict()
        self._lock = Lock()

    def __call__(self, texts: list[str]) -> list[list[float]]:
        vectors = [[float(x) for x in row] for row in self.client.service.system.embedder_backend.embed(texts)]
        with self._lock:
            for text, vector in zip(texts, vectors, strict=True):
                self._texts[tuple(vector)] = text
                self._texts.move_to_end(tuple(vector))
            while len(self._texts) > self.size:
                self._texts.popitem(last=False)
        return vectors

    def text_of(self, vector: Sequence[float]) -> str:
        with self._lock:
            text = self._texts.get(tuple(float(x) for x in vector))
        if text is None:
            raise InvalidArgument("this query vector was not made by the m3 storage's embedder",
                                  hint="Build the Memory with embedder=storage.embedder (m3_memory does).")
        return text


class M3Storage:
    """CrewAI's ``StorageBackend`` on m3 (see the module docstring for the mapping and its limits)."""

    def __init__(self, client: M3Client, *, scope: Literal["agent", "user", "org"] = "agent",
                 memory_type: str = "note"):
        self.client = client
        self.scope = scope
        self.memory_type = memory_type
        self.embedder = M3Embedder(client)
        self.max_scan: int = client.service.config["limits.max_k"]
        self._max_query: int = client.service.config["limits.max_text_chars"]

    # -- writes --------------------------------------------------------------------------------------------

    def save(self, records: list[MemoryRecord]) -> None:
        for record in records:
            token = record_token(record.id)
            self.client.call("memory_write", {
                "content": record.content, "title": _title(record), "type": self.memory_type, "scope": self.scope,
                "importance": record.importance, "metadata": _meta(record), "conversation_id": token,
                "source": record.source})

    def update(self, record: MemoryRecord) -> None:
        row = self._row(record.id)
        if row is None:
            self.save([record])
            return
        self.client.call("memory_supersede", {"id": row["id"], "content": record.content, "title": _title(record),
                                              "importance": record.importance, "metadata": _meta(record),
                                              "reason": "CrewAI memory update"})

    def delete(self, scope_prefix: str | None = None, categories: list[str] | None = None,
               record_ids: list[str] | None = None, older_than: datetime | None = None,
               metadata_filter: dict[str, Any] | None = None) -> int:
        if record_ids is not None:
            rows = [row for rid in record_ids if (row := self._row(rid)) is not None]
            rows = [row for row in rows if _under(row, scope_prefix)]
        else:
            rows = self._scan(scope_prefix)
        doomed = [row for row in rows if _keeps(row, categories, metadata_filter)
                  and (older_than is None or _record(row).created_at < _naive(older_than))]
        for row in doomed:
            self.client.call("memory_delete", {"id": row["id"], "reason": "CrewAI memory delete"})
        return len(doomed)

    def reset(self, scope_prefix: str | None = None) -> None:
        self.delete(scope_prefix=scope_prefix)

    # -- reads ---------------------------------------------------------------------------------------------

    def search(self, query_embedding: list[float], scope_prefix: str | None = None,
               categories: list[str] | None = None, metadata_filter: dict[str, Any] | None = None,
               limit: int = 10, min_score: float = 0.0) -> list[tuple[MemoryRecord, float]]:
        text = self.embedder.text_of(query_embedding)[:self._max_query - 30]
        query = f"{text} {path_token('crs', scope_parts(scope_prefix))}" if scope_parts(scope_prefix) else text
        rows = self._rows(query, min(self.max_scan, max(limit, 1) * 4))
        hits = [(_record(row), float(row["score"])) for row in rows
                if _under(row, scope_prefix) and _keeps(row, categories, metadata_filter)
                and row["score"] >= min_score]
        return hits[:limit]

    def get_record(self, record_id: str) -> MemoryRecord | None:
        row = self._row(record_id)
        return None if row is None else _record(row)

    def list_records(self, scope_prefix: str | None = None, limit: int = 200, offset: int = 0) -> list[MemoryRecord]:
        records = sorted((_record(row) for row in self._scan(scope_prefix)), key=lambda r: r.created_at, reverse=True)
        return records[offset:offset + limit]

    def get_scope_info(self, scope: str) -> ScopeInfo:
        records = [_record(row) for row in self._scan(scope)]
        times = [r.created_at for r in records]
        return ScopeInfo(path=scope_path(scope_parts(scope)), record_count=len(records),
                         categories=sorted({c for r in records for c in r.categories}),
                         oldest_record=min(times, default=None), newest_record=max(times, default=None),
                         child_scopes=self.list_scopes(scope))

    def list_scopes(self, parent: str = "/") -> list[str]:
        base = scope_parts(parent)
        children = {scope_path(parts[:len(base) + 1]) for row in self._scan(parent)
                    if len(parts := scope_parts(row["metadata"]["crewai"]["scope"])) > len(base)}
        return sorted(children)

    def list_categories(self, scope_prefix: str | None = None) -> dict[str, int]:
        counts: dict[str, int] = {}
        for row in self._scan(scope_prefix):
            for category in row["metadata"]["crewai"]["categories"]:
                counts[category] = counts.get(category, 0) + 1
        return dict(sorted(counts.items()))

    def count(self, scope_prefix: str | None = None) -> int:
        return len(self._scan(scope_prefix))

    async def asave(self, records: list[MemoryRecord]) -> None:
        await anyio.to_thread.run_sync(self.save, records)

    async def asearch(self, query_embedding: list[float], scope_prefix: str | None = None,
                      categories: list[str] | None = None, metadata_filter: dict[str, Any] | None = None,
                      limit: int = 10, min_score: float = 0.0) -> list[tuple[MemoryRecord, float]]:
        return await anyio.to_thread.run_sync(
            lambda: self.search(query_embedding, scope_prefix, categories, metadata_filter, limit, min_score))

    async def adelete(self, scope_prefix: str | None = None, categories: list[str] | None = None,
                      record_ids: list[str] | None = None, older_than: datetime | None = None,
                      metadata_filter: dict[str, Any] | None = None) -> int:
        return await anyio.to_thread.run_sync(
            lambda: self.delete(scope_prefix, categories, record_ids, older_than, metadata_filter))

    def _rows(self, query: str, k: int, **filters: Any) -> list[dict[str, Any]]:
        """This agent's current CrewAI rows among m3's ``k`` best for ``query``."""
        found = self.client.call("memory_search", {"query": query, "k": k, "type": self.memory_type,
                                                   "agent_id": self.client.agent_id, **filters})
        return [row for row in found["items"] if isinstance(row["metadata"].get("crewai"), dict)]

    def _row(self, record_id: str) -> dict[str, Any] | None:
        token = record_token(record_id)
        rows = [row for row in self._rows(token, 4, conversation_id=token)
                if row["metadata"]["crewai"]["id"] == record_id]
        return rows[0] if rows else None

    def _scan(self, scope_prefix: str | None) -> list[dict[str, Any]]:
        """The (at most ``max_scan``) rows under a scope."""
        rows = self._rows(path_token("crs", scope_parts(scope_prefix)), self.max_scan)
        return [row for row in rows if _under(row, scope_prefix)]


def m3_memory(client: M3Client, **options: Any) -> Memory:
    """A CrewAI ``Memory`` on m3 storage, with m3's embedder and CrewAI's LLM consolidation off."""
    storage = options.pop("storage", None) or M3Storage(client)
    options.setdefault("consolidation_threshold", 1.0)  # CrewAI's documented "off"
    return Memory(storage=storage, embedder=storage.embedder, **options)


def _title(record: MemoryRecord) -> str:
    return " ".join([record_token(record.id), *prefix_tokens("crs", scope_parts(record.scope))])


def _meta(record: MemoryRecord) -> dict[str, Any]:
    return {"crewai": {"id": record.id, "scope": scope_path(scope_parts(record.scope)),
                       "categories": list(record.categories), "metadata": dict(record.metadata),
                       "private": record.private, "source": record.source,
                       "created_at": _naive(record.created_at).isoformat()}}


def _record(row: dict[str, Any]) -> MemoryRecord:
    meta = row["metadata"]["crewai"]
    return MemoryRecord(id=meta["id"], content=row["content"], scope=meta["scope"], categories=meta["categories"],
                        metadata=meta["metadata"], importance=row["importance"],
                        created_at=_time(meta["created_at"]), last_accessed=_time(row["recorded_at"]),
                        source=meta["source"], private=meta["private"])


def _time(text: str) -> datetime:
    """CrewAI's convention: naive UTC (its records default to ``datetime.utcnow()``)."""
    return _naive(datetime.fromisoformat(text.replace("Z", "+00:00")))


def _naive(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(tzinfo=None) if moment.tzinfo else moment


def _under(row: dict[str, Any], scope_prefix: str | None) -> bool:
    base = scope_parts(scope_prefix)
    return scope_parts(row["metadata"]["crewai"]["scope"])[:len(base)] == base


def _keeps(row: dict[str, Any], categories: list[str] | None, metadata_filter: dict[str, Any] | None) -> bool:
    meta = row["metadata"]["crewai"]
    if categories and not set(categories) & set(meta["categories"]):
        return False
    return all(meta["metadata"].get(key) == want for key, want in (metadata_filter or {}).items())
