"""Read audit and erasure records (issue 17): ``read_audit`` and ``erasures``.

``read_audit`` holds one row per memory or chat row a tool showed to a reader: who read (``reader``), whose
data it was (``subject_agent``, ``subject_user``: the row's owner when it was read), what (``kind``, ``ref_id``),
through which tool and when. ``erasures`` keeps the fact that ``gdpr_forget`` erased a subject: the SHA-256 of
the subject, when, by whom and how many rows of each kind, never the subject's data. Same tables on SQLite and
PostgreSQL.

Revision ID: 0007_read_audit
Revises: 0006
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from m3.store.types import UTCDateTime, json_type

revision = "0007_read_audit"
down_revision = "0006"
branch_labels = None
depends_on = None

Seq = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "read_audit",
        sa.Column("seq", Seq, primary_key=True, autoincrement=True),
        sa.Column("at", UTCDateTime(), nullable=False),
        sa.Column("reader", sa.String(200)),
        sa.Column("subject_agent", sa.String(200)),
        sa.Column("subject_user", sa.String(200)),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("ref_id", sa.String(36), nullable=False),
        sa.Column("tool", sa.String(64), nullable=False),
    )
    op.create_index("ix_read_audit_at", "read_audit", ["at"])
    op.create_index("ix_read_audit_subject_agent", "read_audit", ["subject_agent", "seq"])
    op.create_index("ix_read_audit_subject_user", "read_audit", ["subject_user", "seq"])
    op.create_index("ix_read_audit_reader", "read_audit", ["reader", "seq"])
    op.create_table(
        "erasures",
        sa.Column("seq", Seq, primary_key=True, autoincrement=True),
        sa.Column("subject_hash", sa.String(64), nullable=False),
        sa.Column("kind", sa.String(8), nullable=False),
        sa.Column("at", UTCDateTime(), nullable=False),
        sa.Column("actor", sa.String(200)),
        sa.Column("counts", json_type(), nullable=False),
    )
    op.create_index("ix_erasures_subject", "erasures", ["subject_hash"])


def downgrade() -> None:
    op.drop_index("ix_erasures_subject", table_name="erasures")
    op.drop_table("erasures")
    for name in ("reader", "subject_user", "subject_agent", "at"):
        op.drop_index(f"ix_read_audit_{name}", table_name="read_audit")
    op.drop_table("read_audit")
