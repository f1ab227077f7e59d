"""Index only retired memories' ``retired_at``.

A plain index on ``retired_at`` holds NULL for every current memory. SQLite
(no statistics) then takes ``retired_at IS NULL`` for a selective equality
and reads the whole index instead of looking candidates up by id: measured
at 20k memories, 197 ms instead of 15 ms for one search's 400 candidates.
The partial index still serves what it is for (time travel: ``retired_at >
t``) and is never chosen for current rows.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

_RETIRED = "retired_at IS NOT NULL"


def upgrade() -> None:
    op.drop_index("ix_memories_retired", table_name="memories")
    op.create_index("ix_memories_retired", "memories", ["retired_at"], sqlite_where=sa.text(_RETIRED),
                    postgresql_where=sa.text(_RETIRED))


def downgrade() -> None:
    op.drop_index("ix_memories_retired", table_name="memories")
    op.create_index("ix_memories_retired", "memories", ["retired_at"])
