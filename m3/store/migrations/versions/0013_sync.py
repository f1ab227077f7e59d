"""Warehouse sync bookkeeping (issue 16, docs/sync.md): ``sync_rows``, ``sync_changes``, ``sync_outbox``,
``sync_state``, ``sync_conflicts``, ``sync_runs``.

Created on both dialects so the two schemas stay identical; only a SQLite store syncs with a warehouse. The
capture triggers that fill ``sync_changes`` are created when sync is switched on (``m3 sync now`` or
``sync.warehouse_url``), not here: a store that never syncs pays nothing per write.

Revision ID: 0013_sync
Revises: 0012_cognitive_loop
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from m3.store.types import UTCDateTime, json_type

revision = "0013_sync"
down_revision = "0012_cognitive_loop"
branch_labels = None
depends_on = None

_SEQ = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "sync_rows",
        sa.Column("tbl", sa.String(40), primary_key=True),
        sa.Column("key", sa.String(300), primary_key=True),
        sa.Column("row_seq", sa.BigInteger),
        sa.Column("hlc", sa.BigInteger, nullable=False),
        sa.Column("origin", sa.String(64), nullable=False),
        sa.Column("deleted", sa.Boolean, nullable=False),
    )
    op.create_index("ix_sync_rows_seq", "sync_rows", ["tbl", "row_seq"])
    op.create_table(
        "sync_changes",
        sa.Column("seq", _SEQ, primary_key=True, autoincrement=True),
        sa.Column("tbl", sa.String(40), nullable=False),
        sa.Column("row_seq", sa.BigInteger, nullable=False),
        sa.Column("at_ms", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "sync_outbox",
        sa.Column("seq", _SEQ, primary_key=True, autoincrement=True),
        sa.Column("tbl", sa.String(40), nullable=False),
        sa.Column("key", sa.String(300), nullable=False),
        sa.Column("row_seq", sa.BigInteger),
        sa.Column("hlc", sa.BigInteger, nullable=False),
        sa.Column("base_hlc", sa.BigInteger),
        sa.Column("base_origin", sa.String(64)),
        sa.UniqueConstraint("tbl", "key", name="uq_sync_outbox_key"),
        sqlite_autoincrement=True,  # seqs never reused: the warehouse's per-node mark counts in them
    )
    op.create_table(
        "sync_state",
        sa.Column("name", sa.String(32), primary_key=True),
        sa.Column("value", json_type(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
    )
    op.create_table(
        "sync_conflicts",
        sa.Column("seq", _SEQ, primary_key=True, autoincrement=True),
        sa.Column("wid", sa.BigInteger, nullable=False, unique=True),
        sa.Column("tbl", sa.String(40), nullable=False),
        sa.Column("key", sa.String(300), nullable=False),
        sa.Column("winner_hlc", sa.BigInteger, nullable=False),
        sa.Column("winner_origin", sa.String(64), nullable=False),
        sa.Column("loser_hlc", sa.BigInteger, nullable=False),
        sa.Column("loser_origin", sa.String(64), nullable=False),
        sa.Column("loser_deleted", sa.Boolean, nullable=False),
        sa.Column("loser_data", json_type()),
        sa.Column("at", UTCDateTime(), nullable=False),
    )
    op.create_table(
        "sync_runs",
        sa.Column("seq", _SEQ, primary_key=True, autoincrement=True),
        sa.Column("started_at", UTCDateTime(), nullable=False),
        sa.Column("finished_at", UTCDateTime()),
        sa.Column("trigger", sa.String(16), nullable=False),
        sa.Column("pushed", sa.Integer, nullable=False),
        sa.Column("pulled", sa.Integer, nullable=False),
        sa.Column("conflicts", sa.Integer, nullable=False),
        sa.Column("error", sa.Text),
    )


def downgrade() -> None:
    for name in ("sync_runs", "sync_conflicts", "sync_state", "sync_outbox", "sync_changes"):
        op.drop_table(name)
    op.drop_index("ix_sync_rows_seq", table_name="sync_rows")
    op.drop_table("sync_rows")
