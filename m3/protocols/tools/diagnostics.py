"""Admin and diagnostics tools (``diagnostics`` domain): the store, the actors and the configuration.

All are read-only and show no memory or chat content and no secret: counts, states and settings
(a secret setting only as set or unset, a store URL with its password replaced by ``***``). Who may call
them: docs/governance.md.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from m3.protocols.base import ToolArgs, ToolResult, ToolSpec
from m3.protocols.tools.meta import NoArgs


class DiagnosticsStoreStatusResult(ToolResult):
    backend: str = Field(description="sqlite or postgresql.")
    url: str = Field(description="The store URL, its password replaced by ***.")
    url_origin: str = Field(description="Where store.url came from: default, file, secret or env.")
    isolation: dict[str, Any] = Field(description="Whether scope=agent rows are private, and where that was set.")
    revision: str | None = Field(description="The schema revision in place.")
    head: str = Field(description="The newest schema revision this m3 knows.")
    current: bool = Field(description="True when the store's schema is at head.")
    counts: dict[str, Any] = Field(
        description="Memories (all, current, retired), vectors by model, memories without a vector of the "
                    "configured model, relationships, history events, chat messages, agents and tasks.")
    embedding_model: str = Field(description="The configured embedding model the count without_vector is about.")
    size_bytes: int | None = Field(None, description="Bytes the store takes on disk (SQLite: the file and its WAL; "
                                                     "PostgreSQL: the database).")
    postgres: dict[str, Any] | None = Field(None, description="On PostgreSQL: the server's version and settings.")
    search_path: dict[str, Any] = Field(
        default_factory=dict,
        description="Which path search's hot loops take: search.native (mode), native or numpy (path), and "
                    "whether the m3_native extension is installed (both paths give the same results); and how "
                    "queries embed (query_embedding: int8 or float32; null when the backend does not say).")


DIAGNOSTICS_STORE_STATUS = ToolSpec(
    name="diagnostics_store_status", domain="diagnostics", args=NoArgs, result=DiagnosticsStoreStatusResult,
    read_only=True,
    description=(
        "Show which store this m3 uses (backend, URL without its password), whether its schema is at the newest "
        "revision, and how many memories (current and retired), chat messages, agents, tasks and vectors per "
        "model it holds. Use it to check that m3 runs on the store you expect or to size the store; it shows "
        "no memory content."
    ),
)


class Latency(ToolResult):
    samples: int = Field(description="How many recent messages the percentiles are over (a bounded window).")
    p50_ms: float | None = Field(description="Median handling time of one message, in milliseconds.")
    p95_ms: float | None = Field(description="95th percentile handling time, in milliseconds.")
    p99_ms: float | None = Field(description="99th percentile handling time, in milliseconds.")


class ActorStats(ToolResult):
    actor: str
    alive: bool
    queue_depth: int | None = Field(None, description="Messages waiting in its inbox.")
    handled: int | None = Field(None, description="Messages handled since it started.")
    failed: int | None = Field(None, description="Messages whose handling raised.")
    restarts: int | None = Field(None, description="Times its supervisor restarted it.")
    running: int | None = Field(None, description="Routers only: how many run now.")
    started: int | None = Field(None, description="Routers only: how many were started.")
    latency: Latency | None = Field(None, description="Percentiles of the time the actor took per message "
                                                      "(a Writer request: its whole group commit).")


class DiagnosticsActorStatsResult(ToolResult):
    actors: list[ActorStats] = Field(description="Each actor of this process's actor system, then the routers.")


DIAGNOSTICS_ACTOR_STATS = ToolSpec(
    name="diagnostics_actor_stats", domain="diagnostics", args=NoArgs, result=DiagnosticsActorStatsResult,
    read_only=True,
    description=(
        "Show each actor of the answering m3 process (Writer, Searcher, Embedder …) and its routers: whether it "
        "is alive, how many messages wait in its queue, how many it handled or failed, how often it was "
        "restarted, and the p50/p95/p99 time it took per recent message. Use it when calls are slow or fail "
        "with timeouts, to see which actor is behind or crashing."
    ),
)


class SettingRow(ToolResult):
    key: str
    value: Any = Field(description="Its value; a secret setting shows only <set, hidden> or its empty default.")
    origin: str = Field(description="default, file, secret or env.")
    env: str = Field(description="The environment variable that sets it.")


class DiagnosticsConfigResult(ToolResult):
    settings: list[SettingRow]


DIAGNOSTICS_CONFIG = ToolSpec(
    name="diagnostics_config", domain="diagnostics", args=NoArgs, result=DiagnosticsConfigResult,
    read_only=True,
    description=(
        "List every m3 setting of the answering process with its value and where it came from (default, the "
        "config file, the secrets vault or an environment variable). Secret settings such as store.url and "
        "embed.key show only whether they are set, never their value. Use it to find out why m3 behaves as it "
        "does, e.g. which limit or embedding model is in force."
    ),
)

class HealthCheck(ToolResult):
    check: str
    status: Literal["ok", "warn", "fail"]
    message: str


class DiagnosticsHealthResult(ToolResult):
    status: Literal["ok", "warn", "fail"] = Field(description="The worst status of the checks.")
    checks: list[HealthCheck] = Field(description="store (reachable), schema (at head), actors (alive, not "
                                                  "restarting), embedding_backlog, engine.")


DIAGNOSTICS_HEALTH = ToolSpec(
    name="diagnostics_health", domain="diagnostics", args=NoArgs, result=DiagnosticsHealthResult, read_only=True,
    description=(
        "One summary of whether m3 is healthy: the store answers, its schema is current, every actor is alive "
        "and not restarting, how many memories wait for a vector, and which process answers (engine or "
        "embedded). Use it first when something seems wrong; the other diagnostics tools give the details."
    ),
)


class SlowCallsArgs(ToolArgs):
    limit: int = Field(10, ge=1, le=100, description="How many of the slowest calls to list.")
    tool: str | None = Field(None, description="Only calls of this tool.")


class SlowCall(ToolResult):
    tool: str
    ms: float = Field(description="How long the call took, in milliseconds.")
    at: datetime = Field(description="When it ended.")
    outcome: str = Field(description="ok, or the error code it ended with.")


class DiagnosticsSlowCallsResult(ToolResult):
    considered: int = Field(description="How many recent calls of this process were looked at (the last 1000).")
    calls: list[SlowCall] = Field(description="The slowest first; no call's arguments or result are kept.")


DIAGNOSTICS_SLOW_CALLS = ToolSpec(
    name="diagnostics_slow_calls", domain="diagnostics", args=SlowCallsArgs, result=DiagnosticsSlowCallsResult,
    read_only=True,
    description=(
        "List the slowest of the recent tool calls this m3 process answered: which tool, how many milliseconds, "
        "when, and whether it failed (never what it was called with). Use it to find which calls make an agent "
        "wait, before looking at diagnostics_actor_stats for the actor behind them."
    ),
)

DIAGNOSTICS_TOOLS: tuple[ToolSpec, ...] = (DIAGNOSTICS_STORE_STATUS, DIAGNOSTICS_ACTOR_STATS, DIAGNOSTICS_CONFIG,
                                           DIAGNOSTICS_HEALTH, DIAGNOSTICS_SLOW_CALLS)
