"""Chat redaction (issue 20, chatlog_redact): who redacted a chat row, when and why; the old text is not kept.

On SQLite the chat FTS5 index (external content) gets an update trigger, so that a row's new content replaces
its old words in the index; PostgreSQL's ``fts_content`` is a generated column and follows by itself.

Revision ID: 0008_chat_redaction
Revises: 0007_read_audit
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from m3.store.types import UTCDateTime

revision = "0008_chat_redaction"
down_revision = "0007_read_audit"
branch_labels = None
depends_on = None

COLUMNS = ("redacted_at", "redacted_by", "redaction_reason")


def upgrade() -> None:
    op.add_column("chatlog", sa.Column("redacted_at", UTCDateTime()))
    op.add_column("chatlog", sa.Column("redacted_by", sa.String(200)))
    op.add_column("chatlog", sa.Column("redaction_reason", sa.String(500)))
    if op.get_bind().dialect.name == "sqlite":
        op.execute(
            "CREATE TRIGGER chatlog_fts_au AFTER UPDATE OF content ON chatlog BEGIN "
            "INSERT INTO chatlog_fts(chatlog_fts, rowid, content) VALUES ('delete', old.seq, old.content); "
            "INSERT INTO chatlog_fts(rowid, content) VALUES (new.seq, new.content); END"
        )


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute("DROP TRIGGER IF EXISTS chatlog_fts_au")
        for name in reversed(COLUMNS):  # (a batch copy of the table would drop its FTS triggers)
            op.execute(f"ALTER TABLE chatlog DROP COLUMN {name}")
        return
    for name in reversed(COLUMNS):
        op.drop_column("chatlog", name)
