"""Embedding models: which model's vectors search uses while the store moves to another model.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

from m3.store.types import UTCDateTime

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    table = op.create_table(
        "embedding_models",
        sa.Column("model", sa.String(200), primary_key=True),
        sa.Column("dim", sa.Integer, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
    )
    # A store from before this revision searched with whatever model it had vectors of: the one with
    # the most vectors stays active, so an upgrade changes no search result.
    found = op.get_bind().execute(sa.text(
        "SELECT model, min(dim), count(*) AS n FROM memory_embeddings GROUP BY model ORDER BY n DESC, model LIMIT 1"
    )).first()
    if found is not None:
        op.bulk_insert(table, [{"model": found[0], "dim": int(found[1]), "state": "active",
                                "updated_at": datetime.now(UTC)}])


def downgrade() -> None:
    op.drop_table("embedding_models")
