"""Coordination: agents and their tokens, task trees with history, inboxes (handoffs), notifications.

The same tables on SQLite and PostgreSQL: no dialect-specific part.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from m3.store.types import UTCDateTime, json_type

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

Seq = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _seq() -> sa.Column:  # type: ignore[type-arg]
    return sa.Column("seq", Seq, primary_key=True, autoincrement=True)


def upgrade() -> None:
    op.create_table(
        "agents", _seq(),
        sa.Column("id", sa.String(200), nullable=False, unique=True),
        sa.Column("role", sa.String(200)),
        sa.Column("description", sa.Text),
        sa.Column("metadata", json_type(), nullable=False),
        sa.Column("registered_at", UTCDateTime(), nullable=False),
        sa.Column("last_seen_at", UTCDateTime(), nullable=False),
        sa.Column("offline_at", UTCDateTime()),
    )
    op.create_table(
        "agent_tokens", _seq(),
        sa.Column("id", sa.String(36), nullable=False, unique=True),
        sa.Column("agent_id", sa.String(200), sa.ForeignKey("agents.id"), nullable=False),
        sa.Column("token_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("label", sa.String(200)),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("revoked_at", UTCDateTime()),
    )
    op.create_index("ix_agent_tokens_agent", "agent_tokens", ["agent_id"])

    op.create_table(
        "tasks", _seq(),
        sa.Column("id", sa.String(36), nullable=False, unique=True),
        sa.Column("parent_id", sa.String(36), sa.ForeignKey("tasks.id")),
        sa.Column("title", sa.Text, nullable=False),
        sa.Column("description", sa.Text),
        sa.Column("kind", sa.String(100)),
        sa.Column("priority", sa.Integer, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("creator", sa.String(200)),
        sa.Column("owner", sa.String(200)),
        sa.Column("lease_expires_at", UTCDateTime()),
        sa.Column("result_memory_id", sa.String(36), sa.ForeignKey("memories.id", ondelete="SET NULL")),
        sa.Column("result_note", sa.Text),
        sa.Column("metadata", json_type(), nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.Column("deleted_at", UTCDateTime()),
    )
    op.create_index("ix_tasks_claim", "tasks", ["state", "kind", "priority"])
    op.create_index("ix_tasks_parent", "tasks", ["parent_id"])
    op.create_index("ix_tasks_owner", "tasks", ["owner"])
    op.create_index("ix_tasks_lease", "tasks", ["lease_expires_at"])

    op.create_table(
        "task_events", _seq(),
        sa.Column("task_id", sa.String(36), sa.ForeignKey("tasks.id", ondelete="CASCADE"), nullable=False),
        sa.Column("event", sa.String(32), nullable=False),
        sa.Column("actor", sa.String(200)),
        sa.Column("at", UTCDateTime(), nullable=False),
        sa.Column("details", json_type(), nullable=False),
    )
    op.create_index("ix_task_events_task", "task_events", ["task_id", "seq"])

    op.create_table(
        "inbox", _seq(),
        sa.Column("id", sa.String(36), nullable=False, unique=True),
        sa.Column("agent_id", sa.String(200), nullable=False),
        sa.Column("from_agent", sa.String(200)),
        sa.Column("task", sa.Text, nullable=False),
        sa.Column("note", sa.Text),
        sa.Column("task_id", sa.String(36), sa.ForeignKey("tasks.id", ondelete="SET NULL")),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("read_at", UTCDateTime()),
    )
    op.create_index("ix_inbox_agent", "inbox", ["agent_id", "read_at", "seq"])

    op.create_table(
        "inbox_links", _seq(),
        sa.Column("inbox_id", sa.String(36), sa.ForeignKey("inbox.id", ondelete="CASCADE"), nullable=False),
        sa.Column("memory_id", sa.String(36), sa.ForeignKey("memories.id", ondelete="CASCADE"), nullable=False),
        sa.Column("type", sa.String(32), nullable=False),
        sa.UniqueConstraint("inbox_id", "memory_id", "type", name="uq_inbox_links_edge"),
    )
    op.create_index("ix_inbox_links_memory", "inbox_links", ["memory_id"])

    op.create_table(
        "notifications", _seq(),
        sa.Column("id", sa.String(36), nullable=False, unique=True),
        sa.Column("agent_id", sa.String(200), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("from_agent", sa.String(200)),
        sa.Column("message", sa.Text, nullable=False),
        sa.Column("ref_id", sa.String(36)),
        sa.Column("data", json_type(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("acked_at", UTCDateTime()),
    )
    op.create_index("ix_notifications_agent", "notifications", ["agent_id", "acked_at", "seq"])
    op.create_index("ix_notifications_ref", "notifications", ["ref_id"])


def downgrade() -> None:
    for name in ("notifications", "inbox_links", "inbox", "task_events", "tasks", "agent_tokens", "agents"):
        op.drop_table(name)
