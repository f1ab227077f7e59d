"""Index superseded memories' ``superseded_by``.

Three paths look memories up by the version that superseded them: ``memory_update`` (the kept copy takes
the row's place in its chain), a hard delete (the rows it superseded let go of it), and the version chain
that ``memory_get``/``memory_history`` walk back one step at a time. Without an index each was a read of the
whole table, content included: about 54 ms per statement at 100k memories (``benchmarks/successor_index.py``),
in the Writer's transaction for the first two.
Partial, like ``retired_at``'s (migration 0004): current memories hold NULL there.

Revision ID: 0015_superseded_by
Revises: 0014_valid_from
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015_superseded_by"
down_revision = "0014_valid_from"
branch_labels = None
depends_on = None

_SUPERSEDED = "superseded_by IS NOT NULL"


def upgrade() -> None:
    op.create_index("ix_memories_superseded_by", "memories", ["superseded_by"],
                    sqlite_where=sa.text(_SUPERSEDED), postgresql_where=sa.text(_SUPERSEDED))


def downgrade() -> None:
    op.drop_index("ix_memories_superseded_by", table_name="memories")
