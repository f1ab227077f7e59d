"""Chat vectors and conversation events (issue 20): ``chat_embeddings`` and ``conversation_events``.

``chat_embeddings`` holds one vector per chat row and embedding model, as ``memory_embeddings`` does for
memories (the Embedder fills it from its backlog; chatlog_search's semantic leg reads it); a row's vectors go
with it (cascade) and when it is redacted. ``conversation_events`` records what was done to a conversation as a
whole (deleted, redacted, promoted, summarised): who, when and counts, never the text. Same tables on SQLite and
PostgreSQL.

Revision ID: 0011_chat_vectors
Revises: 0010_entities
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from m3.store.types import UTCDateTime, VectorType, json_type

revision = "0011_chat_vectors"
down_revision = "0010_entities"
branch_labels = None
depends_on = None

Seq = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "chat_embeddings",
        sa.Column("seq", Seq, primary_key=True, autoincrement=True),
        sa.Column("chat_id", sa.String(36), sa.ForeignKey("chatlog.id", ondelete="CASCADE"), nullable=False),
        sa.Column("model", sa.String(200), nullable=False),
        sa.Column("dim", sa.Integer, nullable=False),
        sa.Column("vector", VectorType(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.UniqueConstraint("chat_id", "model", name="uq_chat_embeddings_row_model"),
    )
    op.create_index("ix_chat_embeddings_model_seq", "chat_embeddings", ["model", "seq"])
    op.create_table(
        "conversation_events",
        sa.Column("seq", Seq, primary_key=True, autoincrement=True),
        sa.Column("conversation_id", sa.String(200), nullable=False),
        sa.Column("event", sa.String(32), nullable=False),
        sa.Column("actor", sa.String(200)),
        sa.Column("at", UTCDateTime(), nullable=False),
        sa.Column("details", json_type(), nullable=False),
    )
    op.create_index("ix_conversation_events_conversation", "conversation_events", ["conversation_id", "seq"])


def downgrade() -> None:
    op.drop_index("ix_conversation_events_conversation", table_name="conversation_events")
    op.drop_table("conversation_events")
    op.drop_index("ix_chat_embeddings_model_seq", table_name="chat_embeddings")
    op.drop_table("chat_embeddings")
