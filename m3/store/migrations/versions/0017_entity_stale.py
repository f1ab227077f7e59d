"""Note the memories the entity pass must read again, instead of looking for them on every pass.

Until now each pass of the entity indexer dropped the mentions of ``SELECT id FROM memories WHERE retired_at IS
NOT NULL`` -- every memory ever retired, three statements per batch in the Writer's transaction, and a probe of
the same set every 5 s when idle -- and never looked again at a memory changed in place (``memory_update`` kept
the old text's names) or made current again (``memory_restore`` left it without any).

A trigger now notes the memory in ``entity_stale`` when its text (title or content) or its ``retired_at`` changes
-- whichever path changed it: a tool, the cognitive loop, a pulled sync version -- in the transaction that
changed it; the pass handles the oldest notes with each batch and deletes them. Notes are seeded with what the
old sweep would still have found (retired memories that still have mentions or relations) and the indexed
memories whose history says they were updated or restored.

Revision ID: 0017_entity_stale
Revises: 0016_lookup_indexes
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017_entity_stale"
down_revision = "0016_lookup_indexes"
branch_labels = None
depends_on = None

_SQLITE_TRIGGER = (
    "CREATE TRIGGER memories_entity_stale AFTER UPDATE OF title, content, retired_at ON memories "
    "WHEN NEW.title IS NOT OLD.title OR NEW.content IS NOT OLD.content OR NEW.retired_at IS NOT OLD.retired_at "
    "BEGIN INSERT INTO entity_stale (memory_id) VALUES (NEW.id); END"
)
_PG_FUNCTION = (
    "CREATE FUNCTION m3_note_entity_stale() RETURNS trigger LANGUAGE plpgsql AS $$ "
    "BEGIN INSERT INTO entity_stale (memory_id) VALUES (NEW.id); RETURN NULL; END $$"
)
_PG_TRIGGER = (
    "CREATE TRIGGER memories_entity_stale AFTER UPDATE OF title, content, retired_at ON memories FOR EACH ROW "
    "WHEN (NEW.title IS DISTINCT FROM OLD.title OR NEW.content IS DISTINCT FROM OLD.content "
    "OR NEW.retired_at IS DISTINCT FROM OLD.retired_at) EXECUTE FUNCTION m3_note_entity_stale()"
)
_SEED = (
    "INSERT INTO entity_stale (memory_id) SELECT id FROM memories "
    "WHERE seq <= (SELECT coalesce(max(seq), 0) FROM entity_watermark) AND ("
    "(retired_at IS NOT NULL AND (EXISTS (SELECT 1 FROM entity_mentions mn WHERE mn.memory_id = memories.id) "
    "OR EXISTS (SELECT 1 FROM entity_relations rel WHERE rel.memory_id = memories.id))) "
    "OR (retired_at IS NULL AND EXISTS (SELECT 1 FROM memory_history h WHERE h.memory_id = memories.id "
    "AND h.event IN ('updated', 'restored')))) ORDER BY seq"
)


def upgrade() -> None:
    op.create_table(
        "entity_stale",
        sa.Column("seq", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True, autoincrement=True),
        sa.Column("memory_id", sa.String(36), nullable=False),
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_PG_FUNCTION)
        op.execute(_PG_TRIGGER)
    else:
        op.execute(_SQLITE_TRIGGER)
    op.execute(_SEED)


def downgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS memories_entity_stale" +
               (" ON memories" if op.get_bind().dialect.name == "postgresql" else ""))
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP FUNCTION IF EXISTS m3_note_entity_stale()")
    op.drop_table("entity_stale")
