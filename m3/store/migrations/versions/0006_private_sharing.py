"""Isolation on by default: grants that share a private memory with named agents, and an owner scope on chat rows.

``memory_grants`` holds one row per (memory, agent) a ``scope=agent`` memory
is shared with (``memory_share``); the isolation clause admits those rows
to the named agents on every read path. ``chatlog.scope`` gives chat rows
the same rule as memories: ``agent`` (the default, also for the rows
already there: they were written with no scope and are their agent's own),
``user`` or ``org``. Same tables on SQLite and PostgreSQL.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from m3.store.types import UTCDateTime

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "memory_grants",
        sa.Column("seq", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True,
                  autoincrement=True),
        sa.Column("memory_id", sa.String(36), sa.ForeignKey("memories.id", ondelete="CASCADE"), nullable=False),
        sa.Column("agent_id", sa.String(200), nullable=False),
        sa.Column("granted_by", sa.String(200)),
        sa.Column("granted_at", UTCDateTime(), nullable=False),
        sa.UniqueConstraint("memory_id", "agent_id", name="uq_memory_grants_pair"),
    )
    op.create_index("ix_memory_grants_agent", "memory_grants", ["agent_id", "memory_id"])
    op.add_column("chatlog", sa.Column("scope", sa.String(8), nullable=False, server_default="agent"))


def downgrade() -> None:
    with op.batch_alter_table("chatlog") as batch:
        batch.drop_column("scope")
    op.drop_index("ix_memory_grants_agent", table_name="memory_grants")
    op.drop_table("memory_grants")
