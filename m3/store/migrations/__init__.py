"""Alembic migrations of the store.

``HEAD`` names the newest revision so that opening an up-to-date store
needs no Alembic import; a test checks it against Alembic's own head.
"""

HEAD = "0017_entity_stale"
