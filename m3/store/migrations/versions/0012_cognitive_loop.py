"""The cognitive loop (issue 15): ``loop_state`` and archiving.

``loop_state`` holds one row per loop pass (``observe``, ``reflect``, ``decay``, ``rollup``): its watermark
(what it has looked at, as JSON the pass defines), whether it is paused, and when it last ran. Moving a
watermark commits in the same transaction as what the pass wrote, so a crash never makes a pass skip or
repeat work.

``memories.archived_at`` / ``archive_reason``: decay and expiry archive a memory (hidden from default
search, never deleted); ``memory_restore`` clears both. An archived memory stays current in the bitemporal
sense (``retired_at`` is untouched). Same tables on SQLite and PostgreSQL.

Revision ID: 0012_cognitive_loop
Revises: 0011_chat_vectors
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from m3.store.types import UTCDateTime, json_type

revision = "0012_cognitive_loop"
down_revision = "0011_chat_vectors"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "loop_state",
        sa.Column("name", sa.String(32), primary_key=True),
        sa.Column("watermark", json_type(), nullable=False),
        sa.Column("paused", sa.Boolean, nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
    )
    with op.batch_alter_table("memories") as batch:
        batch.add_column(sa.Column("archived_at", UTCDateTime()))
        batch.add_column(sa.Column("archive_reason", sa.String(32)))
    op.create_index("ix_memories_archived", "memories", ["archived_at"],
                    sqlite_where=sa.text("archived_at IS NOT NULL"),
                    postgresql_where=sa.text("archived_at IS NOT NULL"))


def downgrade() -> None:
    op.drop_index("ix_memories_archived", table_name="memories")
    with op.batch_alter_table("memories") as batch:
        batch.drop_column("archive_reason")
        batch.drop_column("archived_at")
    op.drop_table("loop_state")
