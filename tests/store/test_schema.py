"""The schema's own rules, checked on its declaration (the migrations test checks both stores match it)."""

from __future__ import annotations

from sqlalchemy import PrimaryKeyConstraint, Table, UniqueConstraint

from m3.store.schema import metadata


def _leading_columns(table: Table) -> set[str]:
    """Columns that lead an index of ``table`` (indexes, unique and primary key constraints)."""
    led = {next(iter(index.columns)).name for index in table.indexes}
    led |= {next(iter(c.columns)).name for c in table.constraints
            if isinstance(c, UniqueConstraint | PrimaryKeyConstraint) and len(c.columns)}
    return led | {column.name for column in table.columns if column.unique}


def test_every_foreign_key_column_leads_an_index() -> None:
    # Deleting a parent row looks its children up by the key (cascade, set null, or the check); without an index
    # that is a read of the child table per deleted row (entities.merged_into made re-indexing files quadratic).
    missing = [f"{table.name}.{column.name}" for table in metadata.sorted_tables for column in table.columns
               if column.foreign_keys and column.name not in _leading_columns(table)]
    assert missing == []
