"""Index the columns rows are looked up by that had no index: memories' ``source`` and three foreign keys.

* ``memories.source``: re-indexing a file retires its current chunks, found by path (``files_index``,
  ``files_forget``); without the index each batch of 500 new chunks read every chunk of the owner.
* ``entities.merged_into``: deleting an entity (the entity pass drops those no memory mentions any more, e.g.
  after their memories were updated, deleted or a file re-indexed) made SQLite look for entities merged into it
  with a read of the whole ``entities`` table, for each one. Re-indexing 8,000 changed files spent most of its
  15 minutes there; 51 s with these indexes (``benchmarks/files_reindex.py``).
* ``tasks.result_memory_id`` and ``inbox.task_id``: the same for a hard-deleted memory (its tasks' results are
  set to NULL) and a deleted task (its inbox items' task).

All partial: most rows hold NULL there, and an index holding NULL for most rows misleads SQLite's planner
(migration 0004). A foreign key's lookup (``column = ?``) implies the column is not NULL, so both stores use
them. A test checks that every foreign key's column leads an index.

Revision ID: 0016_lookup_indexes
Revises: 0015_superseded_by
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016_lookup_indexes"
down_revision = "0015_superseded_by"
branch_labels = None
depends_on = None

#: (index, table, column)
INDEXES = (
    ("ix_memories_source", "memories", "source"),
    ("ix_entities_merged_into", "entities", "merged_into"),
    ("ix_tasks_result_memory", "tasks", "result_memory_id"),
    ("ix_inbox_task", "inbox", "task_id"),
)


def upgrade() -> None:
    for name, table, column in INDEXES:
        present = sa.text(f"{column} IS NOT NULL")
        op.create_index(name, table, [column], sqlite_where=present, postgresql_where=present)


def downgrade() -> None:
    for name, table, _column in reversed(INDEXES):
        op.drop_index(name, table_name=table)
