"""The store: SQLAlchemy Core schema, migrations and queries for SQLite and PostgreSQL."""
