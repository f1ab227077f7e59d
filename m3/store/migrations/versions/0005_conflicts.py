"""Conflict candidates: pairs of current memories that look alike but disagree on an anchor.

Similarity supersession records a ``near_duplicate`` pair here instead of
retiring either memory when the two texts disagree on numbers, dates,
identifiers, amounts or names; the cognitive loop's Reflector will add
``contradiction`` pairs to the same table. The owner columns repeat the
pair's (shared) owner so that listings filter by isolation in SQL. The
same tables on SQLite and PostgreSQL.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from m3.store.types import UTCDateTime, json_type

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

Seq = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "conflicts",
        sa.Column("seq", Seq, primary_key=True, autoincrement=True),
        sa.Column("id", sa.String(36), nullable=False, unique=True),
        sa.Column("memory_a", sa.String(36), sa.ForeignKey("memories.id", ondelete="CASCADE"), nullable=False),
        sa.Column("memory_b", sa.String(36), sa.ForeignKey("memories.id", ondelete="CASCADE"), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("details", json_type(), nullable=False),
        sa.Column("similarity", sa.Float),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("resolution", sa.String(32)),
        sa.Column("detected_at", UTCDateTime(), nullable=False),
        sa.Column("resolved_at", UTCDateTime()),
        sa.Column("resolved_by", sa.String(200)),
        sa.Column("scope", sa.String(8), nullable=False),
        sa.Column("agent_id", sa.String(200)),
        sa.Column("user_id", sa.String(200)),
        sa.UniqueConstraint("memory_a", "memory_b", "kind", name="uq_conflicts_pair"),
    )
    op.create_index("ix_conflicts_status", "conflicts", ["status", "seq"])
    op.create_index("ix_conflicts_memory_b", "conflicts", ["memory_b"])


def downgrade() -> None:
    op.drop_table("conflicts")
