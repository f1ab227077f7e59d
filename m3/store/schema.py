"""The store's tables (SQLAlchemy Core), identical on SQLite and PostgreSQL.

This module describes the *current* schema. Migrations under
``m3/store/migrations`` create it; a test checks that migrating an empty
database yields exactly these tables. Full-text indexes are dialect
specific and live in the migrations: FTS5 tables kept by triggers on SQLite,
generated ``tsvector`` columns on PostgreSQL.
"""

from __future__ import annotations

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

from m3.store.types import UTCDateTime, VectorType, json_type

metadata = MetaData()

# SQLite only gives INTEGER PRIMARY KEY rowid semantics to the exact type INTEGER.
SeqType = BigInteger().with_variant(Integer(), "sqlite")

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
    Index("ix_memories_owner", "type", "agent_id", "user_id"),
    Index("ix_memories_conversation", "conversation_id"),
    Index("ix_memories_hash", "content_hash"),
    Index("ix_memories_recorded", "recorded_at"),
    # Partial: an index holding NULL for every current row misleads SQLite's planner (migration 0003).
    Index("ix_memories_retired", "retired_at", sqlite_where=text("retired_at IS NOT NULL"),
          postgresql_where=text("retired_at IS NOT NULL")),
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
    Index("ix_chatlog_conversation", "conversation_id", "turn"),
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
