"""Messages of the admin tools: export and import a whole store, verify it, optimise it, its embedding backlog."""

from __future__ import annotations

from typing import Any, TypedDict

from m3.protocols.base import Request


class ExportedStore(TypedDict):
    """The reply to :class:`ExportStore`: the file's lines (header first), rows per table, the revision."""

    lines: list[str]
    tables: dict[str, int]
    revision: str


class ExportStore(Request[ExportedStore]):
    """Every row of every table, as JSON Lines, read in one snapshot (to the Searcher)."""

    #: What the header line says besides the format, the revision and the counts (m3 version, time).
    header: dict[str, Any]


class ImportedRows(TypedDict):
    imported: dict[str, int]
    skipped: dict[str, int]


class ImportStore(Request[ImportedRows]):
    """Insert decoded export rows (table -> rows) in one transaction (to the Writer); refused with
    ``store_not_empty`` when the store holds rows, unless ``merge`` (then rows already present are skipped)."""

    tables: dict[str, tuple[dict[str, Any], ...]]
    merge: bool = False


class VerifyStore(Request[list[dict[str, Any]]]):
    """Check the store's integrity and reply each check's finding (to the Searcher); ``full``: the slow checks."""

    full: bool = False


class VerifyFulltext(Request[list[dict[str, Any]]]):
    """Check the full-text indexes against their tables (to the Writer): SQLite's FTS5 check takes the write
    lock, and only a transaction begun for writing waits for it (a reader's fails whenever another wrote)."""


class OptimiseStore(Request[list[str]]):
    """Refresh statistics and compact indexes (``vacuum``: rewrite the files too), outside any transaction (to the
    Writer, which commits what it holds first); replies the statements run."""

    vacuum: bool = False
    rebuild_fulltext: bool = False


class EmbeddingBacklog(Request[list[dict[str, Any]]]):
    """Per model (``models`` first, then every model the store knows): memories waiting for a vector, oldest first."""

    models: tuple[str, ...]
    limit: int = 20
