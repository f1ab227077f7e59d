"""The entity graph (issue 15 point 5): entities, their mentions in memories, relations between them, the record
of merges and the indexer's watermark. Mentions and relations go with their memory by foreign key (a hard
delete or gdpr_forget); the same tables on SQLite and PostgreSQL.

Revision ID: 0010_entities
Revises: 0008_chat_redaction
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from m3.store.types import UTCDateTime, json_type

revision = "0010_entities"
down_revision = "0008_chat_redaction"
branch_labels = None
depends_on = None

Seq = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "entities",
        sa.Column("seq", Seq, primary_key=True, autoincrement=True),
        sa.Column("id", sa.String(36), nullable=False, unique=True),
        sa.Column("name", sa.String(300), nullable=False),
        sa.Column("norm", sa.String(300), nullable=False),
        sa.Column("type", sa.String(32), nullable=False),
        sa.Column("scope", sa.String(8), nullable=False),
        sa.Column("agent_id", sa.String(200)),
        sa.Column("user_id", sa.String(200)),
        sa.Column("partition", sa.String(420), nullable=False),
        sa.Column("aliases", json_type(), nullable=False),
        sa.Column("merged_into", sa.String(36), sa.ForeignKey("entities.id", ondelete="CASCADE")),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.UniqueConstraint("partition", "type", "norm", name="uq_entities_name"),
    )
    op.create_index("ix_entities_norm", "entities", ["norm"])
    op.create_table(
        "entity_mentions",
        sa.Column("seq", Seq, primary_key=True, autoincrement=True),
        sa.Column("entity_id", sa.String(36), sa.ForeignKey("entities.id", ondelete="CASCADE"), nullable=False),
        sa.Column("memory_id", sa.String(36), sa.ForeignKey("memories.id", ondelete="CASCADE"), nullable=False),
        sa.Column("span_start", sa.Integer, nullable=False),
        sa.Column("span_end", sa.Integer, nullable=False),
        sa.Column("surface", sa.String(300), nullable=False),
        sa.UniqueConstraint("entity_id", "memory_id", "span_start", name="uq_entity_mentions_span"),
    )
    op.create_index("ix_entity_mentions_memory", "entity_mentions", ["memory_id"])
    op.create_table(
        "entity_relations",
        sa.Column("seq", Seq, primary_key=True, autoincrement=True),
        sa.Column("id", sa.String(36), nullable=False, unique=True),
        sa.Column("subject_id", sa.String(36), sa.ForeignKey("entities.id", ondelete="CASCADE"), nullable=False),
        sa.Column("predicate", sa.String(64), nullable=False),
        sa.Column("object_id", sa.String(36), sa.ForeignKey("entities.id", ondelete="CASCADE"), nullable=False),
        sa.Column("valid_from", UTCDateTime()),
        sa.Column("valid_to", UTCDateTime()),
        sa.Column("memory_id", sa.String(36), sa.ForeignKey("memories.id", ondelete="CASCADE"), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
    )
    op.create_index("ix_entity_relations_subject", "entity_relations", ["subject_id"])
    op.create_index("ix_entity_relations_object", "entity_relations", ["object_id"])
    op.create_index("ix_entity_relations_memory", "entity_relations", ["memory_id"])
    op.create_table(
        "entity_merges",
        sa.Column("seq", Seq, primary_key=True, autoincrement=True),
        sa.Column("source_id", sa.String(36), nullable=False),
        sa.Column("target_id", sa.String(36), nullable=False),
        sa.Column("actor", sa.String(200)),
        sa.Column("at", UTCDateTime(), nullable=False),
        sa.Column("details", json_type(), nullable=False),
    )
    op.create_index("ix_entity_merges_source", "entity_merges", ["source_id"])
    op.create_index("ix_entity_merges_target", "entity_merges", ["target_id"])
    op.create_table(
        "entity_watermark",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("seq", sa.BigInteger, nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
    )


def downgrade() -> None:
    for table in ("entity_watermark", "entity_merges", "entity_relations", "entity_mentions", "entities"):
        op.drop_table(table)
