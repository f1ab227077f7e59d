"""The store's tables (SQLAlchemy Core), identical on SQLite and PostgreSQL.

This module describes the *current* schema. Migrations under
``m3/store/migrations`` create it; a test checks that migrating an empty
database yields exactly these tables. Full-text indexes are dialect
specific and live in the migrations: FTS5 tables kept by triggers on SQLite,
generated ``tsvector`` columns on PostgreSQL.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.types import TypeEngine

from m3.store.types import UTCDateTime, VectorType, json_type

metadata = MetaData()

# SQLite only gives INTEGER PRIMARY KEY rowid semantics to the exact type INTEGER.
SeqType = BigInteger().with_variant(Integer(), "sqlite")


def _present(name: str, column: str) -> Index:
    """An index of the rows where ``column`` is not NULL: for lookups by a value of a column most rows leave
    NULL (an index holding NULL for most rows misleads SQLite's planner, migration 0004)."""
    present = text(f"{column} IS NOT NULL")
    return Index(name, column, sqlite_where=present, postgresql_where=present)


memories = Table(
    "memories", metadata,
    Column("seq", SeqType, primary_key=True, autoincrement=True),
    Column("id", String(36), nullable=False, unique=True),
    Column("type", String(32), nullable=False),
    Column("title", Text),
    Column("content", Text, nullable=False),
    Column("metadata", json_type(), nullable=False),
    Column("scope", String(8), nullable=False),
    Column("agent_id", String(200)),
    Column("user_id", String(200)),
    Column("importance", Float, nullable=False),
    Column("pinned", Boolean, nullable=False),
    Column("expires_at", UTCDateTime()),
    Column("content_hash", String(64), nullable=False),
    Column("access_count", Integer, nullable=False),
    Column("last_accessed_at", UTCDateTime()),
    Column("conversation_id", String(200)),
    Column("source", Text),
    Column("valid_from", UTCDateTime(), nullable=False),
    Column("valid_to", UTCDateTime()),
    Column("recorded_at", UTCDateTime(), nullable=False),
    Column("retired_at", UTCDateTime()),
    Column("retire_reason", String(32)),
    Column("superseded_by", String(36)),
    # Archived by decay or expiry (migration 0012): hidden from default search, never deleted.
    Column("archived_at", UTCDateTime()),
    Column("archive_reason", String(32)),
    Index("ix_memories_owner", "type", "agent_id", "user_id"),
    Index("ix_memories_conversation", "conversation_id"),
    Index("ix_memories_hash", "content_hash"),
    Index("ix_memories_recorded", "recorded_at"),
    # A question naming a time ranks the memories valid then (migration 0014).
    Index("ix_memories_valid_from", "valid_from"),
    # Partial: an index holding NULL for every current row misleads SQLite's planner (migration 0004).
    Index("ix_memories_retired", "retired_at", sqlite_where=text("retired_at IS NOT NULL"),
          postgresql_where=text("retired_at IS NOT NULL")),
    Index("ix_memories_archived", "archived_at", sqlite_where=text("archived_at IS NOT NULL"),
          postgresql_where=text("archived_at IS NOT NULL")),
    # Version chains, updates and hard deletes look rows up by their successor (migration 0015).
    Index("ix_memories_superseded_by", "superseded_by", sqlite_where=text("superseded_by IS NOT NULL"),
          postgresql_where=text("superseded_by IS NOT NULL")),
    # A re-indexed file's chunks are found by path (migration 0016).
    _present("ix_memories_source", "source"),
)

memory_embeddings = Table(
    "memory_embeddings", metadata,
    Column("seq", SeqType, primary_key=True, autoincrement=True),
    Column("memory_id", String(36), ForeignKey("memories.id", ondelete="CASCADE"), nullable=False),
    Column("model", String(200), nullable=False),
    Column("dim", Integer, nullable=False),
    Column("vector", VectorType(), nullable=False),
    Column("created_at", UTCDateTime(), nullable=False),
    UniqueConstraint("memory_id", "model", name="uq_embeddings_memory_model"),
    Index("ix_embeddings_model_seq", "model", "seq"),
)

memory_relationships = Table(
    "memory_relationships", metadata,
    Column("seq", SeqType, primary_key=True, autoincrement=True),
    Column("from_id", String(36), ForeignKey("memories.id", ondelete="CASCADE"), nullable=False),
    Column("to_id", String(36), ForeignKey("memories.id", ondelete="CASCADE"), nullable=False),
    Column("type", String(32), nullable=False),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("created_by", String(200)),
    UniqueConstraint("from_id", "to_id", "type", name="uq_relationships_edge"),
    Index("ix_relationships_to", "to_id"),
)

memory_history = Table(
    "memory_history", metadata,
    Column("seq", SeqType, primary_key=True, autoincrement=True),
    Column("memory_id", String(36), ForeignKey("memories.id", ondelete="CASCADE"), nullable=False),
    Column("event", String(32), nullable=False),
    Column("actor", String(200)),
    Column("at", UTCDateTime(), nullable=False),
    Column("details", json_type(), nullable=False),
    Index("ix_history_memory", "memory_id", "seq"),
)

chatlog = Table(
    "chatlog", metadata,
    Column("seq", SeqType, primary_key=True, autoincrement=True),
    Column("id", String(36), nullable=False, unique=True),
    Column("conversation_id", String(200), nullable=False),
    Column("role", String(16), nullable=False),
    Column("content", Text, nullable=False),
    Column("agent_id", String(200)),
    Column("model", String(200)),
    Column("turn", Integer, nullable=False),
    Column("at", UTCDateTime(), nullable=False),
    Column("recorded_at", UTCDateTime(), nullable=False),
    # Who may read the row, as for memories (migration 0006): agent (the writer's own), user or org.
    Column("scope", String(8), nullable=False, server_default="agent"),
    # chatlog_redact (migration 0008): the content is replaced by a marker; who, when and why are kept here.
    Column("redacted_at", UTCDateTime()),
    Column("redacted_by", String(200)),
    Column("redaction_reason", String(500)),
    Index("ix_chatlog_conversation", "conversation_id", "turn"),
)

#: Vectors of chat rows (migration 0011_chat_vectors), for chatlog_search's semantic leg; a redacted or deleted
#: row has none.
chat_embeddings = Table(
    "chat_embeddings", metadata,
    Column("seq", SeqType, primary_key=True, autoincrement=True),
    Column("chat_id", String(36), ForeignKey("chatlog.id", ondelete="CASCADE"), nullable=False),
    Column("model", String(200), nullable=False),
    Column("dim", Integer, nullable=False),
    Column("vector", VectorType(), nullable=False),
    Column("created_at", UTCDateTime(), nullable=False),
    UniqueConstraint("chat_id", "model", name="uq_chat_embeddings_row_model"),
    Index("ix_chat_embeddings_model_seq", "model", "seq"),
)

#: What happened to a conversation as a whole (migration 0011_chat_vectors): ``deleted``, ``redacted``,
#: ``promoted``, ``summarised``, by whom, when, and counts (never the text).
conversation_events = Table(
    "conversation_events", metadata,
    Column("seq", SeqType, primary_key=True, autoincrement=True),
    Column("conversation_id", String(200), nullable=False),
    Column("event", String(32), nullable=False),
    Column("actor", String(200)),
    Column("at", UTCDateTime(), nullable=False),
    Column("details", json_type(), nullable=False),
    Index("ix_conversation_events_conversation", "conversation_id", "seq"),
)

#: Private (scope=agent) memories shared with named agents by their owner (memory_share, migration 0006).
memory_grants = Table(
    "memory_grants", metadata,
    Column("seq", SeqType, primary_key=True, autoincrement=True),
    Column("memory_id", String(36), ForeignKey("memories.id", ondelete="CASCADE"), nullable=False),
    Column("agent_id", String(200), nullable=False),
    Column("granted_by", String(200)),
    Column("granted_at", UTCDateTime(), nullable=False),
    UniqueConstraint("memory_id", "agent_id", name="uq_memory_grants_pair"),
    Index("ix_memory_grants_agent", "agent_id", "memory_id"),
)


#: One row per embedding model the store has vectors of; exactly one is ``active`` (the model search uses)
#: once any model was chosen. A model being filled in for a change of model is ``building``; a model that
#: was active before is ``retired`` (its vectors are kept, so switching back is quick).
embedding_models = Table(
    "embedding_models", metadata,
    Column("model", String(200), primary_key=True),
    Column("dim", Integer, nullable=False),
    Column("state", String(16), nullable=False),
    Column("updated_at", UTCDateTime(), nullable=False),
)


# --- coordination (migration 0003_coordination) -------------------------------------------------

agents = Table(
    "agents", metadata,
    Column("seq", SeqType, primary_key=True, autoincrement=True),
    Column("id", String(200), nullable=False, unique=True),
    Column("role", String(200)),
    Column("description", Text),
    Column("metadata", json_type(), nullable=False),
    Column("registered_at", UTCDateTime(), nullable=False),
    Column("last_seen_at", UTCDateTime(), nullable=False),
    Column("offline_at", UTCDateTime()),
)

agent_tokens = Table(
    "agent_tokens", metadata,
    Column("seq", SeqType, primary_key=True, autoincrement=True),
    Column("id", String(36), nullable=False, unique=True),
    Column("agent_id", String(200), ForeignKey("agents.id"), nullable=False),
    Column("token_hash", String(64), nullable=False, unique=True),
    Column("label", String(200)),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("revoked_at", UTCDateTime()),
    Index("ix_agent_tokens_agent", "agent_id"),
)

tasks = Table(
    "tasks", metadata,
    Column("seq", SeqType, primary_key=True, autoincrement=True),
    Column("id", String(36), nullable=False, unique=True),
    Column("parent_id", String(36), ForeignKey("tasks.id")),
    Column("title", Text, nullable=False),
    Column("description", Text),
    Column("kind", String(100)),
    Column("priority", Integer, nullable=False),
    Column("state", String(16), nullable=False),
    Column("creator", String(200)),
    Column("owner", String(200)),
    Column("lease_expires_at", UTCDateTime()),
    Column("result_memory_id", String(36), ForeignKey("memories.id", ondelete="SET NULL")),
    Column("result_note", Text),
    Column("metadata", json_type(), nullable=False),
    Column("version", Integer, nullable=False),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("updated_at", UTCDateTime(), nullable=False),
    Column("deleted_at", UTCDateTime()),
    Index("ix_tasks_claim", "state", "kind", "priority"),
    Index("ix_tasks_parent", "parent_id"),
    Index("ix_tasks_owner", "owner"),
    Index("ix_tasks_lease", "lease_expires_at"),
    # Foreign keys' lookups when the parent row is deleted (migration 0016), as below.
    _present("ix_tasks_result_memory", "result_memory_id"),
)

task_events = Table(
    "task_events", metadata,
    Column("seq", SeqType, primary_key=True, autoincrement=True),
    Column("task_id", String(36), ForeignKey("tasks.id", ondelete="CASCADE"), nullable=False),
    Column("event", String(32), nullable=False),
    Column("actor", String(200)),
    Column("at", UTCDateTime(), nullable=False),
    Column("details", json_type(), nullable=False),
    Index("ix_task_events_task", "task_id", "seq"),
)

inbox = Table(
    "inbox", metadata,
    Column("seq", SeqType, primary_key=True, autoincrement=True),
    Column("id", String(36), nullable=False, unique=True),
    Column("agent_id", String(200), nullable=False),
    Column("from_agent", String(200)),
    Column("task", Text, nullable=False),
    Column("note", Text),
    Column("task_id", String(36), ForeignKey("tasks.id", ondelete="SET NULL")),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("read_at", UTCDateTime()),
    Index("ix_inbox_agent", "agent_id", "read_at", "seq"),
    _present("ix_inbox_task", "task_id"),
)

inbox_links = Table(
    "inbox_links", metadata,
    Column("seq", SeqType, primary_key=True, autoincrement=True),
    Column("inbox_id", String(36), ForeignKey("inbox.id", ondelete="CASCADE"), nullable=False),
    Column("memory_id", String(36), ForeignKey("memories.id", ondelete="CASCADE"), nullable=False),
    Column("type", String(32), nullable=False),
    UniqueConstraint("inbox_id", "memory_id", "type", name="uq_inbox_links_edge"),
    Index("ix_inbox_links_memory", "memory_id"),
)

notifications = Table(
    "notifications", metadata,
    Column("seq", SeqType, primary_key=True, autoincrement=True),
    Column("id", String(36), nullable=False, unique=True),
    Column("agent_id", String(200), nullable=False),
    Column("kind", String(32), nullable=False),
    Column("from_agent", String(200)),
    Column("message", Text, nullable=False),
    Column("ref_id", String(36)),
    Column("data", json_type(), nullable=False),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("acked_at", UTCDateTime()),
    Index("ix_notifications_agent", "agent_id", "acked_at", "seq"),
    Index("ix_notifications_ref", "ref_id"),
)


# --- conflict candidates (migration 0005_conflicts) ------------------------------------------------

#: Pairs of current memories that look alike but disagree (``kind``: ``near_duplicate`` from similarity
#: supersession, ``contradiction`` from the Reflector); ``status`` open|resolved. ``memory_a`` is the older.
conflicts = Table(
    "conflicts", metadata,
    Column("seq", SeqType, primary_key=True, autoincrement=True),
    Column("id", String(36), nullable=False, unique=True),
    Column("memory_a", String(36), ForeignKey("memories.id", ondelete="CASCADE"), nullable=False),
    Column("memory_b", String(36), ForeignKey("memories.id", ondelete="CASCADE"), nullable=False),
    Column("kind", String(32), nullable=False),
    Column("reason", Text, nullable=False),
    Column("details", json_type(), nullable=False),
    Column("similarity", Float),
    Column("status", String(16), nullable=False),
    Column("resolution", String(32)),
    Column("detected_at", UTCDateTime(), nullable=False),
    Column("resolved_at", UTCDateTime()),
    Column("resolved_by", String(200)),
    Column("scope", String(8), nullable=False),
    Column("agent_id", String(200)),
    Column("user_id", String(200)),
    UniqueConstraint("memory_a", "memory_b", "kind", name="uq_conflicts_pair"),
    Index("ix_conflicts_status", "status", "seq"),
    Index("ix_conflicts_memory_b", "memory_b"),
)


# --- governance (migration 0007_read_audit) ------------------------------------------------------

#: One row per memory or chat row a tool showed to a reader (kept ``audit.retention_days``): who read, whose
#: data it was when read, what, through which tool and when.
read_audit = Table(
    "read_audit", metadata,
    Column("seq", SeqType, primary_key=True, autoincrement=True),
    Column("at", UTCDateTime(), nullable=False),
    Column("reader", String(200)),
    Column("subject_agent", String(200)),
    Column("subject_user", String(200)),
    Column("kind", String(16), nullable=False),
    Column("ref_id", String(36), nullable=False),
    Column("tool", String(64), nullable=False),
    Index("ix_read_audit_at", "at"),
    Index("ix_read_audit_subject_agent", "subject_agent", "seq"),
    Index("ix_read_audit_subject_user", "subject_user", "seq"),
    Index("ix_read_audit_reader", "reader", "seq"),
)

#: That gdpr_forget erased a subject: the SHA-256 of ``<kind>:<id>``, when, by whom and how many rows per table.
erasures = Table(
    "erasures", metadata,
    Column("seq", SeqType, primary_key=True, autoincrement=True),
    Column("subject_hash", String(64), nullable=False),
    Column("kind", String(8), nullable=False),
    Column("at", UTCDateTime(), nullable=False),
    Column("actor", String(200)),
    Column("counts", json_type(), nullable=False),
    Index("ix_erasures_subject", "subject_hash"),
)


# --- the entity graph (migration 0010_entities) ----------------------------------------------------

#: Things memories name (people, organisations, dates, amounts, titles ...), found by the EntityIndexer. One row
#: per canonical name and type within an owner ``partition`` (``<scope>|<agent if scope=agent>|<user>``): what an
#: agent's private memories name is that agent's own entity. ``merged_into``: entity_merge folded it into another.
entities = Table(
    "entities", metadata,
    Column("seq", SeqType, primary_key=True, autoincrement=True),
    Column("id", String(36), nullable=False, unique=True),
    Column("name", String(300), nullable=False),
    Column("norm", String(300), nullable=False),
    Column("type", String(32), nullable=False),
    Column("scope", String(8), nullable=False),
    Column("agent_id", String(200)),
    Column("user_id", String(200)),
    Column("partition", String(420), nullable=False),
    Column("aliases", json_type(), nullable=False),
    Column("merged_into", String(36), ForeignKey("entities.id", ondelete="CASCADE")),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("updated_at", UTCDateTime(), nullable=False),
    UniqueConstraint("partition", "type", "norm", name="uq_entities_name"),
    Index("ix_entities_norm", "norm"),
    # Deleting an entity looks for those merged into it (migration 0016): without an index, a read of the table.
    _present("ix_entities_merged_into", "merged_into"),
)

#: Where a memory names an entity (character span of its title and content as indexed).
entity_mentions = Table(
    "entity_mentions", metadata,
    Column("seq", SeqType, primary_key=True, autoincrement=True),
    Column("entity_id", String(36), ForeignKey("entities.id", ondelete="CASCADE"), nullable=False),
    Column("memory_id", String(36), ForeignKey("memories.id", ondelete="CASCADE"), nullable=False),
    Column("span_start", Integer, nullable=False),
    Column("span_end", Integer, nullable=False),
    Column("surface", String(300), nullable=False),
    UniqueConstraint("entity_id", "memory_id", "span_start", name="uq_entity_mentions_span"),
    Index("ix_entity_mentions_memory", "memory_id"),
)

#: ``subject predicate object`` stated by one memory, valid when that memory is (its valid_from / valid_to).
entity_relations = Table(
    "entity_relations", metadata,
    Column("seq", SeqType, primary_key=True, autoincrement=True),
    Column("id", String(36), nullable=False, unique=True),
    Column("subject_id", String(36), ForeignKey("entities.id", ondelete="CASCADE"), nullable=False),
    Column("predicate", String(64), nullable=False),
    Column("object_id", String(36), ForeignKey("entities.id", ondelete="CASCADE"), nullable=False),
    Column("valid_from", UTCDateTime()),
    Column("valid_to", UTCDateTime()),
    Column("memory_id", String(36), ForeignKey("memories.id", ondelete="CASCADE"), nullable=False),
    Column("created_at", UTCDateTime(), nullable=False),
    Index("ix_entity_relations_subject", "subject_id"),
    Index("ix_entity_relations_object", "object_id"),
    Index("ix_entity_relations_memory", "memory_id"),
)

#: entity_merge's record: which entity was folded into which, by whom, and the mentions and relations it moved.
entity_merges = Table(
    "entity_merges", metadata,
    Column("seq", SeqType, primary_key=True, autoincrement=True),
    Column("source_id", String(36), nullable=False),
    Column("target_id", String(36), nullable=False),
    Column("actor", String(200)),
    Column("at", UTCDateTime(), nullable=False),
    Column("details", json_type(), nullable=False),
    Index("ix_entity_merges_source", "source_id"),
    Index("ix_entity_merges_target", "target_id"),
)

#: The EntityIndexer's watermark: the ``memories.seq`` up to which every memory was looked at (one row, id 1).
entity_watermark = Table(
    "entity_watermark", metadata,
    Column("id", Integer, primary_key=True),
    Column("seq", BigInteger, nullable=False),
    Column("updated_at", UTCDateTime(), nullable=False),
)

#: Memories the entity pass must read again (migration 0017): triggers note each memory whose text changed in
#: place, that was retired or that became current again; the pass drops what such a memory mentioned, indexes
#: the current ones anew and deletes the notes it handled. No foreign key: a note may outlive a hard delete.
entity_stale = Table(
    "entity_stale", metadata,
    Column("seq", SeqType, primary_key=True, autoincrement=True),
    Column("memory_id", String(36), nullable=False),
)

#: The cognitive loop's passes (migration 0012): each pass's watermark (JSON the pass defines), pause flag and
#: last run. A watermark moves in the transaction that commits what the pass wrote.
loop_state = Table(
    "loop_state", metadata,
    Column("name", String(32), primary_key=True),
    Column("watermark", json_type(), nullable=False),
    Column("paused", Boolean, nullable=False),
    Column("updated_at", UTCDateTime(), nullable=False),
)


# --- warehouse sync bookkeeping (migration 0013_sync; docs/sync.md) ------------------------------------

#: The version (hybrid logical clock value and origin node) of each synced row this store last sent or received,
#: by the row's machine-independent key; ``row_seq`` is the row's local ``seq`` (None once deleted).
sync_rows = Table(
    "sync_rows", metadata,
    Column("tbl", String(40), primary_key=True),
    Column("key", String(300), primary_key=True),
    Column("row_seq", BigInteger),
    Column("hlc", BigInteger, nullable=False),
    Column("origin", String(64), nullable=False),
    Column("deleted", Boolean, nullable=False),
    Index("ix_sync_rows_seq", "tbl", "row_seq"),
)

#: Rows changed since the last sync, written by triggers once sync is switched on (a table and a local ``seq``).
sync_changes = Table(
    "sync_changes", metadata,
    Column("seq", SeqType, primary_key=True, autoincrement=True),
    Column("tbl", String(40), nullable=False),
    Column("row_seq", BigInteger, nullable=False),
    Column("at_ms", BigInteger, nullable=False),
)

#: Versions stamped and waiting to be pushed: the clock value given to the change and the version it was based on.
sync_outbox = Table(
    "sync_outbox", metadata,
    Column("seq", SeqType, primary_key=True, autoincrement=True),
    Column("tbl", String(40), nullable=False),
    Column("key", String(300), nullable=False),
    Column("row_seq", BigInteger),
    Column("hlc", BigInteger, nullable=False),
    Column("base_hlc", BigInteger),
    Column("base_origin", String(64)),
    UniqueConstraint("tbl", "key", name="uq_sync_outbox_key"),
    # AUTOINCREMENT: a seq is never given twice, even after the outbox was emptied (the warehouse's mark of how
    # far this node's outbox was applied counts in these numbers).
    sqlite_autoincrement=True,
)

#: Small named values: the node id, the clock, the pull watermark, whether capture is on.
sync_state = Table(
    "sync_state", metadata,
    Column("name", String(32), primary_key=True),
    Column("value", json_type(), nullable=False),
    Column("updated_at", UTCDateTime(), nullable=False),
)

def conflict_log_columns(json: TypeEngine[Any], time: TypeEngine[Any]) -> list[Column[Any]]:
    """The columns of one entry of the sync conflict log, the warehouse's (``m3sync_conflicts``) and each node's
    copy of it alike: which row, the winning and the losing version, the loser's columns, when."""
    return [
        Column("tbl", String(40), nullable=False),
        Column("key", String(300), nullable=False),
        Column("winner_hlc", BigInteger, nullable=False),
        Column("winner_origin", String(64), nullable=False),
        Column("loser_hlc", BigInteger, nullable=False),
        Column("loser_origin", String(64), nullable=False),
        Column("loser_deleted", Boolean, nullable=False),
        Column("loser_data", json),
        Column("at", time, nullable=False),
    ]


#: The fields of a conflict log entry (:func:`conflict_log_columns`), as copied from the warehouse.
CONFLICT_LOG_FIELDS = tuple(c.name for c in conflict_log_columns(json_type(), UTCDateTime()))

#: Concurrent changes the warehouse resolved, copied from it (``wid``: the entry's id in the warehouse).
sync_conflicts = Table(
    "sync_conflicts", metadata,
    Column("seq", SeqType, primary_key=True, autoincrement=True),
    Column("wid", BigInteger, nullable=False, unique=True),
    *conflict_log_columns(json_type(), UTCDateTime()),
)

#: One row per sync run: when, why, what moved, and the error if it failed.
sync_runs = Table(
    "sync_runs", metadata,
    Column("seq", SeqType, primary_key=True, autoincrement=True),
    Column("started_at", UTCDateTime(), nullable=False),
    Column("finished_at", UTCDateTime()),
    Column("trigger", String(16), nullable=False),
    Column("pushed", Integer, nullable=False),
    Column("pulled", Integer, nullable=False),
    Column("conflicts", Integer, nullable=False),
    Column("error", Text),
)
