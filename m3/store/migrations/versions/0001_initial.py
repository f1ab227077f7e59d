"""Initial schema: memories, embeddings, relationships, history, chat log, full-text indexes.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from m3.store.types import UTCDateTime, VectorType, json_type

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

Seq = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _seq() -> sa.Column:  # type: ignore[type-arg]
    return sa.Column("seq", Seq, primary_key=True, autoincrement=True)


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        # Before memory_embeddings: its column has pgvector's type. A server where m3's role may not create
        # extensions needs it created once by an administrator (docs/postgres.md).
        op.execute("CREATE EXTENSION IF NOT EXISTS vector")
    op.create_table(
        "memories", _seq(),
        sa.Column("id", sa.String(36), nullable=False, unique=True),
        sa.Column("type", sa.String(32), nullable=False),
        sa.Column("title", sa.Text),
        sa.Column("content", sa.Text, nullable=False),
        sa.Column("metadata", json_type(), nullable=False),
        sa.Column("scope", sa.String(8), nullable=False),
        sa.Column("agent_id", sa.String(200)),
        sa.Column("user_id", sa.String(200)),
        sa.Column("importance", sa.Float, nullable=False),
        sa.Column("pinned", sa.Boolean, nullable=False),
        sa.Column("expires_at", UTCDateTime()),
        sa.Column("content_hash", sa.String(64), nullable=False),
        sa.Column("access_count", sa.Integer, nullable=False),
        sa.Column("last_accessed_at", UTCDateTime()),
        sa.Column("conversation_id", sa.String(200)),
        sa.Column("source", sa.Text),
        sa.Column("valid_from", UTCDateTime(), nullable=False),
        sa.Column("valid_to", UTCDateTime()),
        sa.Column("recorded_at", UTCDateTime(), nullable=False),
        sa.Column("retired_at", UTCDateTime()),
        sa.Column("retire_reason", sa.String(32)),
        sa.Column("superseded_by", sa.String(36)),
    )
    op.create_index("ix_memories_owner", "memories", ["type", "agent_id", "user_id"])
    op.create_index("ix_memories_conversation", "memories", ["conversation_id"])
    op.create_index("ix_memories_hash", "memories", ["content_hash"])
    op.create_index("ix_memories_recorded", "memories", ["recorded_at"])
    op.create_index("ix_memories_retired", "memories", ["retired_at"])

    op.create_table(
        "memory_embeddings", _seq(),
        sa.Column("memory_id", sa.String(36), sa.ForeignKey("memories.id", ondelete="CASCADE"), nullable=False),
        sa.Column("model", sa.String(200), nullable=False),
        sa.Column("dim", sa.Integer, nullable=False),
        sa.Column("vector", VectorType(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.UniqueConstraint("memory_id", "model", name="uq_embeddings_memory_model"),
    )
    op.create_index("ix_embeddings_model_seq", "memory_embeddings", ["model", "seq"])

    op.create_table(
        "memory_relationships", _seq(),
        sa.Column("from_id", sa.String(36), sa.ForeignKey("memories.id", ondelete="CASCADE"), nullable=False),
        sa.Column("to_id", sa.String(36), sa.ForeignKey("memories.id", ondelete="CASCADE"), nullable=False),
        sa.Column("type", sa.String(32), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("created_by", sa.String(200)),
        sa.UniqueConstraint("from_id", "to_id", "type", name="uq_relationships_edge"),
    )
    op.create_index("ix_relationships_to", "memory_relationships", ["to_id"])

    op.create_table(
        "memory_history", _seq(),
        sa.Column("memory_id", sa.String(36), sa.ForeignKey("memories.id", ondelete="CASCADE"), nullable=False),
        sa.Column("event", sa.String(32), nullable=False),
        sa.Column("actor", sa.String(200)),
        sa.Column("at", UTCDateTime(), nullable=False),
        sa.Column("details", json_type(), nullable=False),
    )
    op.create_index("ix_history_memory", "memory_history", ["memory_id", "seq"])

    op.create_table(
        "chatlog", _seq(),
        sa.Column("id", sa.String(36), nullable=False, unique=True),
        sa.Column("conversation_id", sa.String(200), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("content", sa.Text, nullable=False),
        sa.Column("agent_id", sa.String(200)),
        sa.Column("model", sa.String(200)),
        sa.Column("turn", sa.Integer, nullable=False),
        sa.Column("at", UTCDateTime(), nullable=False),
        sa.Column("recorded_at", UTCDateTime(), nullable=False),
    )
    op.create_index("ix_chatlog_conversation", "chatlog", ["conversation_id", "turn"])

    if op.get_bind().dialect.name == "sqlite":
        _sqlite_fulltext()
    else:
        _postgres_fulltext()


def _sqlite_fulltext() -> None:
    # External-content FTS5 tables: the text lives once, in the base table;
    # triggers keep the index in step inside the same transaction.
    tokenize = "porter unicode61 remove_diacritics 2"
    op.execute(
        "CREATE VIRTUAL TABLE memories_fts USING fts5("
        f"title, content, content='memories', content_rowid='seq', tokenize='{tokenize}')"
    )
    op.execute(
        "CREATE TRIGGER memories_fts_ai AFTER INSERT ON memories BEGIN "
        "INSERT INTO memories_fts(rowid, title, content) VALUES (new.seq, coalesce(new.title, ''), new.content); END"
    )
    op.execute(
        "CREATE TRIGGER memories_fts_ad AFTER DELETE ON memories BEGIN "
        "INSERT INTO memories_fts(memories_fts, rowid, title, content) "
        "VALUES ('delete', old.seq, coalesce(old.title, ''), old.content); END"
    )
    op.execute(
        "CREATE TRIGGER memories_fts_au AFTER UPDATE OF title, content ON memories BEGIN "
        "INSERT INTO memories_fts(memories_fts, rowid, title, content) "
        "VALUES ('delete', old.seq, coalesce(old.title, ''), old.content); "
        "INSERT INTO memories_fts(rowid, title, content) VALUES (new.seq, coalesce(new.title, ''), new.content); END"
    )
    op.execute(
        "CREATE VIRTUAL TABLE chatlog_fts USING fts5("
        f"content, content='chatlog', content_rowid='seq', tokenize='{tokenize}')"
    )
    op.execute(
        "CREATE TRIGGER chatlog_fts_ai AFTER INSERT ON chatlog BEGIN "
        "INSERT INTO chatlog_fts(rowid, content) VALUES (new.seq, new.content); END"
    )
    op.execute(
        "CREATE TRIGGER chatlog_fts_ad AFTER DELETE ON chatlog BEGIN "
        "INSERT INTO chatlog_fts(chatlog_fts, rowid, content) VALUES ('delete', old.seq, old.content); END"
    )


def _postgres_fulltext() -> None:
    op.execute(
        "ALTER TABLE memories ADD COLUMN fts_content tsvector "
        "GENERATED ALWAYS AS (to_tsvector('english', content)) STORED"
    )
    op.execute(
        "ALTER TABLE memories ADD COLUMN fts_title tsvector "
        "GENERATED ALWAYS AS (to_tsvector('english', coalesce(title, ''))) STORED"
    )
    op.execute("CREATE INDEX ix_memories_fts_content ON memories USING gin (fts_content)")
    op.execute("CREATE INDEX ix_memories_fts_title ON memories USING gin (fts_title)")
    op.execute(
        "ALTER TABLE chatlog ADD COLUMN fts_content tsvector "
        "GENERATED ALWAYS AS (to_tsvector('english', content)) STORED"
    )
    op.execute("CREATE INDEX ix_chatlog_fts_content ON chatlog USING gin (fts_content)")


def downgrade() -> None:
    for name in ("chatlog", "memory_history", "memory_relationships", "memory_embeddings", "memories"):
        if op.get_bind().dialect.name == "sqlite":
            op.execute(f"DROP TABLE IF EXISTS {name}_fts")
        op.drop_table(name)
