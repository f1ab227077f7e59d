"""Alembic environment: m3 always migrates on a connection it opened itself."""

from __future__ import annotations

from alembic import context

from m3.store.schema import metadata

connection = context.config.attributes.get("connection")
if connection is None:  # pragma: no cover - m3 never runs alembic without a connection
    raise RuntimeError("m3 migrations run through m3.store.engine.migrate(), not the alembic CLI")

context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
