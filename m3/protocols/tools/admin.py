"""Admin tools (``admin`` domain): move a whole store, check it, maintain it, its embeddings and its engine.

They act on the store as a whole, so only the local OS user may call them: a caller bound by a token
(HTTP, remote MCP) is refused with ``forbidden`` (docs/governance.md, docs/admin.md).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from m3.protocols.base import ToolArgs, ToolResult, ToolSpec
from m3.protocols.tools.meta import NoArgs

FilePath = Field(min_length=1, max_length=4096,
                 description="An absolute path on the machine the engine runs on (a relative one is refused).")


class AdminExportArgs(ToolArgs):
    path: str = FilePath
    overwrite: bool = Field(False, description="Replace the file if it exists.")


class AdminExportResult(ToolResult):
    path: str
    bytes: int = Field(description="Size of the file written.")
    revision: str = Field(description="The schema revision of the exported store (in the header line).")
    rows: int = Field(description="Rows written, all tables together.")
    tables: dict[str, int] = Field(description="Rows written per table.")


ADMIN_EXPORT = ToolSpec(
    name="admin_export", domain="admin", args=AdminExportArgs, result=AdminExportResult, read_only=True,
    description=(
        "Write the whole store to one JSON Lines file: every memory with all its versions (retired ones "
        "included), history, links, vectors with their model, sharing grants, chat log, agents, tasks and their "
        "events, inboxes, notifications, conflicts and the read audit. Use it to back a store up or to move it "
        "between SQLite and PostgreSQL with admin_import; the file holds private content (owner-only, 0600)."
    ),
)


class AdminImportArgs(ToolArgs):
    path: str = FilePath
    merge: bool = Field(False, description="Import into a store that holds rows: skip every row whose id (or "
                                           "unique key) is already there, add the rest.")


class AdminImportResult(ToolResult):
    path: str
    revision: str
    merged: bool
    rows: int = Field(description="Rows inserted, all tables together.")
    imported: dict[str, int] = Field(description="Rows inserted per table.")
    skipped: dict[str, int] = Field(description="With merge: rows already present per table, left as they were.")


ADMIN_IMPORT = ToolSpec(
    name="admin_import", domain="admin", args=AdminImportArgs, result=AdminImportResult,
    description=(
        "Load a file written by admin_export into this store, in one transaction: all of it or, on any error, "
        "nothing. Use it to restore a backup or to finish moving a store to another backend. It refuses a file "
        "of a newer m3 and a store that already holds rows (unless merge=true, which skips rows already here)."
    ),
)


class AdminPathArgs(ToolArgs):
    path: str = FilePath


class AdminExportInspectResult(ToolResult):
    path: str
    m3_version: str | None = Field(description="The m3 that wrote the file.")
    revision: str
    exported_at: str | None
    backend: str | None = Field(description="The backend the file was exported from.")
    tables: dict[str, int] = Field(description="Rows per table, as the header says.")
    importable: bool = Field(description="True when this m3 can import the file (its revision is this store's).")
    problem: dict[str, Any] | None = Field(description="Why it cannot: the error admin_import would raise.")


ADMIN_EXPORT_INSPECT = ToolSpec(
    name="admin_export_inspect", domain="admin", args=AdminPathArgs, result=AdminExportInspectResult,
    read_only=True,
    description=(
        "Read an export file's header and check every line without importing anything: which m3 and schema "
        "revision wrote it, from which backend, how many rows per table, and whether admin_import would accept "
        "it here. Use it before an import, or to check that a backup file is whole."
    ),
)


class AdminVerifyArgs(ToolArgs):
    full: bool = Field(False, description="SQLite: PRAGMA integrity_check (reads every page) instead of quick_check.")


class VerifyCheck(ToolResult):
    check: str
    status: Literal["ok", "warn", "fail"]
    message: str
    hint: str | None = None
    ids: list[str] = Field(description="Up to 20 ids (or seq numbers) of the rows the problem is about.")


class AdminVerifyResult(ToolResult):
    ok: bool = Field(description="True when no check failed.")
    problems: int = Field(description="How many checks failed or warned.")
    checks: list[VerifyCheck]


ADMIN_VERIFY = ToolSpec(
    name="admin_verify", domain="admin", args=AdminVerifyArgs, result=AdminVerifyResult, read_only=True,
    description=(
        "Check the whole store's integrity and report every problem without fixing anything: the database "
        "file (SQLite integrity or quick check), the full-text indexes against their tables, each memory's "
        "content hash, each vector's dimension against its model, and links, history, grants or tasks that "
        "point at rows that do not exist. Use it after a crash, a restore or a move, or when results look wrong."
    ),
)


class AdminOptimiseArgs(ToolArgs):
    vacuum: bool = Field(False, description="Also rewrite the database to return free space (slow; SQLite VACUUM, "
                                            "PostgreSQL VACUUM FULL, which locks each table while it runs).")
    rebuild_fulltext: bool = Field(False, description="SQLite: build the full-text indexes again from their tables "
                                                      "first (what admin_verify suggests when they disagree).")


class AdminOptimiseResult(ToolResult):
    backend: str
    statements: list[str] = Field(description="The maintenance statements run, in order.")
    seconds: float


ADMIN_OPTIMISE = ToolSpec(
    name="admin_optimise", domain="admin", args=AdminOptimiseArgs, result=AdminOptimiseResult,
    description=(
        "Maintain the store: refresh the query planner's statistics and compact the full-text indexes (SQLite: "
        "PRAGMA optimize and FTS5 optimize; PostgreSQL: VACUUM (ANALYZE)), optionally VACUUM to give free space "
        "back. Use it after a large import or deletion, or when searches got slower as the store grew."
    ),
)


class AdminBacklogArgs(ToolArgs):
    limit: int = Field(20, ge=0, le=1000, description="How many of the oldest waiting memories to list per model.")


class WaitingMemory(ToolResult):
    id: str
    recorded_at: datetime


class ModelBacklog(ToolResult):
    model: str
    state: str | None = Field(description="active (search uses it), building, retired, or None (not recorded yet).")
    pending: int = Field(description="Current memories without a vector of this model.")
    oldest_recorded_at: datetime | None
    oldest: list[WaitingMemory] = Field(description="The oldest waiting memories, oldest first (ids only).")


class AdminBacklogResult(ToolResult):
    configured_model: str
    models: list[ModelBacklog] = Field(description="The configured model first, then every model the store knows.")


ADMIN_EMBEDDING_BACKLOG = ToolSpec(
    name="admin_embedding_backlog", domain="admin", args=AdminBacklogArgs, result=AdminBacklogResult,
    read_only=True,
    description=(
        "Show what waits for a vector, per embedding model: how many current memories have none yet, since "
        "when, and the oldest of them by id. Use it when semantic search misses recent memories or during a "
        "change of model, to see how far the Embedder is behind."
    ),
)


class AdminReembedArgs(ToolArgs):
    model: str | None = Field(None, description="The model to embed for; only the configured embed.model can be "
                                                "(default). Change the model in the settings first.")


class AdminReembedResult(ToolResult):
    model: str
    active_model: str | None = Field(description="The model search uses now; it switches once every memory has a "
                                                 "vector of the configured one.")
    memories: int
    pending: int = Field(description="Memories still without a vector of the model.")
    started: bool = Field(description="True when this process works the backlog (the engine, or embedded mode); "
                                      "False when another engine on the store holds that job.")


ADMIN_REEMBED = ToolSpec(
    name="admin_reembed", domain="admin", args=AdminReembedArgs, result=AdminReembedResult,
    description=(
        "Start giving every memory a vector of the configured embedding model, in the background, and return "
        "at once with the progress. Use it after changing embed.model, or when admin_embedding_backlog shows "
        "memories waiting; follow the progress with admin_embedding_backlog or embedder_status."
    ),
)


class AdminEngineStatusResult(ToolResult):
    mode: Literal["engine", "embedded"] = Field(
        description="engine: a shared engine process answers; embedded: m3 runs inside the calling program.")
    pid: int
    version: str
    uptime_s: float | None = Field(description="Seconds since the engine (or the embedded service) started.")
    socket: str | None = Field(description="The engine's Unix socket; None in embedded mode.")
    inflight: int | None = Field(description="Calls being answered now (engine only).")
    requests: int | None = Field(description="Calls answered since the engine started (engine only).")
    idle_exit_s: float | None = Field(description="The engine exits after this long without a call.")
    frontends: int | None = Field(description="Front-ends connected now (MCP sessions, relays), when known.")
    background: dict[str, Any] = Field(description="The background jobs this process runs (embedding backlog …).")


ADMIN_ENGINE_STATUS = ToolSpec(
    name="admin_engine_status", domain="admin", args=NoArgs, result=AdminEngineStatusResult, read_only=True,
    description=(
        "Show the m3 process that answers: whether it is the shared engine or m3 embedded in this program, its "
        "pid, version and uptime, its socket, calls in flight and answered, and the background jobs it runs. "
        "Use it to find out which engine a front-end talks to, or whether one is running stale code."
    ),
)

ADMIN_TOOLS: tuple[ToolSpec, ...] = (ADMIN_EXPORT, ADMIN_IMPORT, ADMIN_EXPORT_INSPECT, ADMIN_VERIFY, ADMIN_OPTIMISE,
                                     ADMIN_EMBEDDING_BACKLOG, ADMIN_REEMBED, ADMIN_ENGINE_STATUS)
