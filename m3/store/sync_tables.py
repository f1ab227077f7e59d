"""Which tables travel between a store and its warehouse (docs/sync.md), and how a row is named there.

A row is named by its table and a *key* that is the same on every machine: the ``id`` where the table has one,
else the columns of its natural unique key (as a JSON list), else, for append-only rows that have neither (history
events), the SHA-256 of the row itself. Local ``seq`` values differ from machine to machine and never travel, nor
do the columns that only describe this machine's use of a row (access counts, liveness).

Deletion is final for tables named by ``id`` or by hash: m3 never gives an erased id to a new row, so a tombstone
there always wins. Rows named by a natural key (a vector per model, a link, an agent) may come back later, so
their deletions are ordinary changes ordered by the hybrid logical clock.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import Table

from m3.store import schema
from m3.store.dump import decode, encode

KeyKind = Literal["id", "natural", "hash"]
OnParentGone = Literal["cascade", "set_null"]


@dataclass(frozen=True)
class Parent:
    """A column of a synced table naming a row of another synced table by its id."""

    column: str
    table: str
    on_gone: OnParentGone


@dataclass(frozen=True)
class SyncTable:
    """How one table travels."""

    table: Table
    kind: KeyKind
    key_columns: tuple[str, ...]
    #: Columns that stay on this machine (never sent; a row arriving keeps the local values, a new one the defaults).
    local_columns: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.table.name

    @property
    def final_delete(self) -> bool:
        """A tombstone of this table is never overwritten (its keys are never reused)."""
        return self.kind != "natural"

    @property
    def data_columns(self) -> tuple[str, ...]:
        """The columns that travel."""
        return tuple(c.name for c in self.table.columns if c.name != "seq" and c.name not in self.local_columns)

    @property
    def parents(self) -> tuple[Parent, ...]:
        found = []
        for column in self.table.columns:
            for fk in column.foreign_keys:
                target = fk.column.table.name
                if target in BY_NAME and fk.column.name == "id":
                    found.append(Parent(column.name, target, "set_null" if fk.ondelete == "SET NULL" else "cascade"))
        return tuple(found)

    def key_of(self, row: Mapping[Any, Any]) -> str:
        """The row's machine-independent key (``row`` as read from the table, or as decoded from the wire)."""
        if self.kind == "id":
            return str(row["id"])
        if self.kind == "natural":
            return json.dumps([_plain(self.table, c, row[c]) for c in self.key_columns], separators=(",", ":"))
        wire = self.encode(row)
        return hashlib.sha256(json.dumps(wire, sort_keys=True, separators=(",", ":")).encode()).hexdigest()

    def key_values(self, key: str) -> dict[str, Any]:
        """The key columns' values a key names (for ``id`` and ``natural`` keys)."""
        if self.kind == "id":
            return {"id": key}
        values = json.loads(key)
        return {c: decode(self.table.columns[c], v) for c, v in zip(self.key_columns, values, strict=True)}

    def encode(self, row: Mapping[Any, Any]) -> dict[str, Any]:
        """The travelling columns of ``row`` as JSON values (:func:`m3.store.dump.encode`)."""
        return {c: encode(self.table.columns[c], row[c]) for c in self.data_columns}

    def decode(self, data: Mapping[str, Any]) -> dict[str, Any]:
        return {c: decode(self.table.columns[c], data.get(c)) for c in self.data_columns}


def _plain(table: Table, column: str, value: Any) -> Any:
    return encode(table.columns[column], value)


#: Every table that travels, parents before children (schema.metadata's foreign-key order).
SYNCED: tuple[SyncTable, ...] = (
    SyncTable(schema.memories, "id", ("id",), local_columns=("access_count", "last_accessed_at")),
    SyncTable(schema.memory_embeddings, "natural", ("memory_id", "model")),
    SyncTable(schema.memory_relationships, "natural", ("from_id", "to_id", "type")),
    SyncTable(schema.memory_history, "hash", ()),
    SyncTable(schema.chatlog, "id", ("id",)),
    SyncTable(schema.chat_embeddings, "natural", ("chat_id", "model")),
    SyncTable(schema.conversation_events, "hash", ()),
    SyncTable(schema.memory_grants, "natural", ("memory_id", "agent_id")),
    SyncTable(schema.agents, "natural", ("id",), local_columns=("last_seen_at", "offline_at")),
    SyncTable(schema.tasks, "id", ("id",)),
    SyncTable(schema.task_events, "hash", ()),
    SyncTable(schema.inbox, "id", ("id",)),
    SyncTable(schema.inbox_links, "natural", ("inbox_id", "memory_id", "type")),
    SyncTable(schema.notifications, "id", ("id",)),
    SyncTable(schema.conflicts, "natural", ("memory_a", "memory_b", "kind")),
    SyncTable(schema.erasures, "hash", ()),
)
_ORDER = {t.name: i for i, t in enumerate(schema.metadata.sorted_tables)}
SYNCED = tuple(sorted(SYNCED, key=lambda t: _ORDER[t.name]))
BY_NAME: dict[str, SyncTable] = {t.name: t for t in SYNCED}

#: Tables that stay on each machine, with the reason (docs/sync.md lists them from here).
LOCAL_TABLES: dict[str, str] = {
    schema.agent_tokens.name: "bearer tokens speak for an agent on this machine's server only",
    schema.read_audit.name: "who read what on this machine; each machine prunes its own after audit.retention_days",
    schema.embedding_models.name: "which model this machine searches with (vectors of other models are re-embedded)",
    schema.entities.name: "derived: each machine's indexer extracts the entities of every memory it holds",
    schema.entity_mentions.name: "derived, as entities",
    schema.entity_relations.name: "derived, as entities",
    schema.entity_merges.name: "derived, as entities (entity_merge acts on one machine's graph)",
    schema.entity_watermark.name: "this machine's indexer's progress",
    schema.entity_stale.name: "this machine's indexer's notes of memories to read again (a pulled change adds its own)",
    schema.loop_state.name: "this machine's cognitive loop progress and pause flags",
}

#: The store's own sync bookkeeping (never exported, never synced).
BOOKKEEPING = ("sync_rows", "sync_changes", "sync_outbox", "sync_state", "sync_conflicts", "sync_runs")


def table(name: str) -> SyncTable:
    return BY_NAME[name]


def order(name: str) -> int:
    """The table's place in foreign-key order (parents first)."""
    return _ORDER[name]
