"""Index memories' ``valid_from``.

A question that names a time ("last spring", "on 25 May") adds a leg ranking the memories valid in
that window (docs/search.md). Without an index SQLite found them by reading every row of the table,
content included: about 10 ms a search at 10k memories, growing with the store.

Revision ID: 0014_valid_from
Revises: 0013_sync
Create Date: 2026-12-04
"""

from __future__ import annotations

from alembic import op

revision = "0014_valid_from"
down_revision = "0013_sync"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_memories_valid_from", "memories", ["valid_from"])


def downgrade() -> None:
    op.drop_index("ix_memories_valid_from", table_name="memories")
