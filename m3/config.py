"""Configuration: one TOML file, an encrypted secrets vault and ``M3_*`` environment variables.

Every setting is declared once in :data:`SETTINGS` with its type, default and description. A value comes
from, in rising precedence: the default, ``m3_config.toml`` in the config root, the vault ``secrets.vault``
beside it (secret settings only, AES-256-GCM through m3/crypto; a plaintext ``secrets.toml`` of earlier
versions is moved into it on first use), the environment. :class:`Config` remembers each
value's origin for ``m3 config show --origin``. The roots and the files are described in docs/config.md.
"""

from __future__ import annotations

import logging
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from m3.crypto.provider import Provider
from m3.crypto.vault import Vault
from m3.errors import ConfigError

Origin = Literal["default", "file", "secret", "env"]
ValueType = type[str] | type[int] | type[float] | type[bool] | type[list[str]]

CONFIG_FILE_NAME = "m3_config.toml"
log = logging.getLogger("m3.config")


@dataclass(frozen=True)
class Setting:
    """One configuration key: ``section.name``, its type, default and meaning."""

    key: str
    type: ValueType
    default: Any
    description: str
    secret: bool = False

    @property
    def env_var(self) -> str:
        return "M3_" + self.key.upper().replace(".", "_")


SETTINGS: tuple[Setting, ...] = (
    Setting("paths.engine", str, "", "Directory of the databases; empty means $M3_HOME/engine."),
    Setting("paths.config", str, "", "Directory of m3_config.toml; set only by environment."),
    Setting("paths.logs", str, "", "Directory of log files; empty means $M3_HOME/logs."),
    Setting("paths.run", str, "",
            "Directory of the engines' sockets, locks and pid files (owner-only); empty means $M3_HOME/run."),
    Setting("store.url", str, "", "SQLAlchemy URL of the store; empty means SQLite at <engine>/m3.db.", secret=True),
    Setting("store.sqlite_synchronous", str, "NORMAL",
            "SQLite synchronous mode. NORMAL survives a process crash; FULL also survives power loss."),
    Setting("store.busy_timeout_ms", int, 10000,
            "How long a write waits for another connection's lock (SQLite busy timeout; PostgreSQL lock_timeout)."),
    Setting("writer.max_batch", int, 256, "Most writes committed in one group-commit transaction."),
    Setting("embed.backend", str, "minilm",
            "Embedding backend: minilm (offline, in process), bge-m3 (bge-m3-lite, in process), flagembedding "
            "(optional extra, torch), or http (any OpenAI-compatible endpoint at embed.url)."),
    Setting("embed.model", str, "",
            "Model id stored with every vector; empty means the backend's own model (all-MiniLM-L6-v2-int8 for "
            "minilm, bge-m3 for bge-m3 and flagembedding). Changing it re-embeds every memory in the background."),
    Setting("embed.threads", int, 0,
            "onnxruntime intra-op threads; 0 means one less than the CPUs (at least 1), leaving a core for "
            "writes and searches."),
    Setting("embed.max_batch", int, 32, "Most texts embedded in one model call."),
    Setting("embed.query_int8", bool, True,
            "minilm: embed search queries with 8-bit products (a model derived once from the packaged one and "
            "kept under <M3_HOME>/models/minilm-queries), about 2.5x faster, vectors within cosine 0.99 of the "
            "exact ones; stored vectors are always exact. false: queries embed exactly too."),
    Setting("embed.settle_ms", int, 100,
            "Writes first: new memories are embedded once no new memory has arrived for this long (the cores "
            "go to the writes callers wait for during a burst, and the model gets fuller batches)."),
    Setting("embed.max_delay_ms", int, 5000,
            "The longest a new memory waits for the settle window before it is embedded anyway (the bound on "
            "how far vectors trail a sustained write load)."),
    Setting("embed.nice", int, 10,
            "How many nice steps less urgent the thread computing deferred embeddings runs (Linux, capped at 19), "
            "so that writes and searches go first on busy cores; 0 leaves its priority."),
    Setting("embed.drain_timeout_s", float, 60.0,
            "On shutdown, how long to keep embedding pending memories before leaving them for the next start."),
    Setting("embed.url", str, "",
            "OpenAI-compatible embeddings endpoint, e.g. http://127.0.0.1:8082/v1. With backend http it is the "
            "embedder; with an in-process backend it is a shared `m3 embedder serve` for the same model, used "
            "while it answers, with the in-process model as fallback."),
    Setting("embed.key", str, "", "Bearer key for embed.url; `m3 embedder serve` requires it when set.", secret=True),
    Setting("embed.timeout_s", float, 30.0, "Longest wait for one answer from embed.url."),
    Setting("embed.server_retry_s", float, 10.0,
            "After the shared embed server failed, how long to embed in process before asking it again."),
    Setting("llm.url", str, "",
            "Base URL of an optional OpenAI-compatible chat endpoint (Ollama, LM Studio, vLLM: e.g. "
            "http://127.0.0.1:11434/v1); empty means no model: the cognitive loop uses its rules only."),
    Setting("llm.model", str, "", "The model name sent to llm.url (one it lists at /v1/models)."),
    Setting("llm.key", str, "", "Bearer key for llm.url, when the endpoint wants one.", secret=True),
    Setting("llm.timeout_s", float, 60.0, "Longest wait for one answer from llm.url."),
    Setting("llm.retries", int, 2,
            "Retries of one model call after a connection error, 429 or 5xx (with backoff; other 4xx are not "
            "retried)."),
    Setting("llm.max_calls_per_tick", int, 4, "Most model calls one pass makes in one tick of the loop (the cost "
            "bound); 0 turns the model off for the loop."),
    Setting("embed.model_dir", str, "",
            "Folder of the model files for bge-m3 and flagembedding; empty means $BGE_M3_LITE_CACHE for bge-m3 "
            "if set, else <M3_HOME>/models/<backend>."),
    Setting("search.k", int, 8, "Default number of results."),
    Setting("search.candidates", int, 100, "Candidates taken from each retrieval leg before fusion."),
    Setting("search.weight_dense", float, 0.63, "Fusion weight of vector similarity."),
    Setting("search.weight_bm25", float, 0.27, "Fusion weight of the BM25 keyword score (normalised per query)."),
    Setting("search.weight_title", float, 0.04, "Fusion weight of the share of query words found in the title."),
    Setting("search.weight_importance", float, 0.03, "Fusion weight of the memory's importance."),
    Setting("search.weight_recency", float, 0.0,
            "Fusion weight of recency (exponential decay of the valid time's age at the question's time). 0 by "
            "default: measured from the question's time it lowered LoCoMo recall (docs/search.md)."),
    Setting("search.weight_access", float, 0.005, "Fusion weight of how often the memory was read."),
    Setting("search.weight_pin", float, 0.005, "Fusion weight of being pinned."),
    Setting("search.recency_half_life_days", float, 30.0, "Age at which the recency signal halves."),
    Setting("search.native", str, "auto",
            "Search's hot loops in the native core (the m3_native extension, native/): auto uses it when "
            "installed, on requires it (an error at start without it), off always uses numpy. The results "
            "are the same either way."),
    Setting("search.mmr_lambda", float, 0.8, "MMR trade-off: 1 is pure relevance, 0 pure diversity."),
    Setting("search.weight_conversation", float, 0.25,
            "Fusion weight of conversation support: the mean relevance of the best-matching memories of the "
            "memory's conversation in the candidate pool."),
    Setting("search.weight_time", float, 0.25,
            "Fusion weight of the time signal when the query names a time ('10 days ago', 'in May 2023'): how "
            "close the memory's valid time is to that time. 0 without one."),
    Setting("search.weight_neighbour", float, 0.3,
            "Fusion weight of neighbour support: the best relevance among the memory and the memories recorded "
            "just before and after it in its conversation (in the candidate pool)."),
    Setting("search.weight_proximity", float, 0.0,
            "Fusion weight of term proximity: the share of the query's neighbouring keyword pairs that a memory "
            "holds within search.proximity_window words of each other (read for the best candidates only; 0 "
            "when the query has fewer than two keywords). Off by default: 0.3 lifted a store pooling many "
            "people's conversations but not the one-person sets (docs/search.md)."),
    Setting("search.proximity_window", int, 4,
            "Words within which the two words of a keyword pair count as close for the proximity signal."),
    Setting("search.proximity_depth", int, 10,
            "How many of the best candidates (at least k) have their text read for the proximity signal; the "
            "others count 0 for it."),
    Setting("search.conversation_top", int, 2,
            "How many of a conversation's best-matching memories its support averages (missing ones count 0)."),
    Setting("supersede.threshold", float, 0.92,
            "Cosine above which a new memory supersedes a current one of the same type, agent and user."),
    Setting("supersede.exempt_types", list, ["conversation", "event", "observation", "belief"],
            "Memory types never superseded by similarity (a repeated event is not a correction; a belief is "
            "versioned by the roll-up pass itself)."),
    Setting("loop.reflect.min_similarity", float, 0.5,
            "Cosine above which the Reflector compares two memories of one owner for a contradiction "
            "(calibrated on benchmarks/reflector.py: an update in the user's own words sits at 0.5-0.9)."),
    Setting("loop.reflect.duplicate_similarity", float, 0.8,
            "Cosine above which the Reflector records two memories of one owner that agree on every anchor (at "
            "least one) as a duplicate: the same fact in other words (a flag; it retires nothing)."),
    Setting("loop.reflect.max_neighbours", int, 5,
            "Most older memories of the same owner the Reflector compares each new memory with, nearest first."),
    Setting("loop.reflect.exempt_types", list, ["conversation", "file_chunk", "event", "observation"],
            "Memory types the Reflector never pairs: records of what was said or seen, not claims that hold."),
    Setting("loop.reflect.vector_wait_s", float, 600.0,
            "How long the Reflector waits for a new memory's vector before passing over it."),
    Setting("limits.max_content_chars", int, 100_000, "Longest memory content accepted."),
    Setting("limits.max_k", int, 200, "Largest k a search may ask for."),
    Setting("limits.max_text_chars", int, 20_000,
            "Longest free-text argument without a limit of its own (a search query, a handoff task, a "
            "notification message); chat messages and memory content use limits.max_content_chars."),
    Setting("limits.max_json_bytes", int, 65_536,
            "Largest JSON object argument (metadata, notification and task data), in UTF-8 bytes."),
    Setting("limits.max_json_depth", int, 32, "Deepest nesting of arrays and objects in any argument."),
    Setting("identity.agent_id", str, "local", "Agent id used when a call names none."),
    Setting("identity.user_id", str, "", "User id used when a call names none; empty means none."),
    Setting("isolation.enforce", bool, True,
            "When true (the default), scope=agent memories and chat rows are visible only to their own agent and "
            "the agents they are shared with (memory_share), on every read path. False shares everything (m3 0.x)."),
    Setting("crypto.fips_mode", bool, False,
            "Use only FIPS-approved algorithms through an OpenSSL in FIPS mode, and refuse (fips_unavailable) "
            "whatever cannot comply; see docs/governance.md for what is and is not claimed."),
    Setting("crypto.key_source", str, "auto",
            "Where a new secrets vault keeps its key: auto (the OS keyring when the optional keyring package has a "
            "real backend, else a 0600 key file), keyring, or file. An existing vault keeps its own."),
    Setting("actors.ask_timeout_s", float, 30.0, "Longest time a caller waits for an actor's answer."),
    # -- coordination (agents, inboxes, tasks, remote MCP) --
    Setting("agents.active_window_s", float, 120.0, "An agent whose last heartbeat is younger than this is active."),
    Setting("agents.offline_after_s", float, 900.0,
            "An agent whose last heartbeat is older than this is offline (idle in between)."),
    Setting("inbox.router_idle_s", float, 60.0,
            "An agent's inbox router actor stops after this long without traffic (it restarts on demand)."),
    Setting("audit.enabled", bool, True,
            "Record every read of a memory or chat row (reader, data subject, id, tool, time) in the read audit."),
    Setting("audit.retention_days", int, 90,
            "Read-audit records older than this many days are pruned (by the Writer, see audit.prune_interval_s)."),
    Setting("audit.prune_interval_s", float, 3600.0,
            "How often a long-running process (m3 serve, the engine) prunes the read audit; it also prunes at start."),
    Setting("files.roots", list, [],
            "Folders whose files callers bound to an agent by a token (remote MCP) may index and read with the files "
            "tools; empty: none. The local user may name any path. Symlinks count where they lead."),
    Setting("files.max_file_bytes", int, 1_000_000, "Files larger than this are left out of files_index."),
    Setting("files.max_files", int, 20_000,
            "The most files one files_index call indexes; a folder with more is refused before any is read."),
    Setting("files.chunk_chars", int, 1500, "Target size of a file chunk in characters (files_index)."),
    Setting("files.chunk_overlap_lines", int, 2,
            "Lines a chunk cut for size repeats at the start of the next one (files_index)."),
    Setting("entities.enabled", bool, True,
            "Find the entities of new memories in the background (long-running processes; entity_extract runs the "
            "pass on demand either way)."),
    Setting("entities.interval_s", float, 5.0,
            "How often the background entity indexer looks for memories written since its last pass."),
    Setting("entities.batch", int, 200, "Most memories the entity indexer reads and hands to the Writer at once."),
    Setting("entities.types", list, [],
            "Extra entity types, each 'type=regex' (e.g. 'ticket=\\bJIRA-\\d+\\b'); a match is an entity of that "
            "type, found before names, dates and amounts. No commas in a pattern (lists travel comma-separated)."),
    Setting("loop.enabled", bool, True,
            "Run the cognitive loop in the background (in the engine holding the background lease); off: no pass "
            "ticks, loop_run_once still runs them when asked."),
    Setting("loop.interval_s", float, 60.0, "Time between two ticks of the cognitive loop."),
    Setting("loop.budget", int, 100, "Most items (memories, chat turns, pairs) each pass looks at in one step."),
    Setting("loop.observe.enabled", bool, True, "Run the Observer pass (facts from conversations)."),
    Setting("loop.reflect.enabled", bool, True, "Run the Reflector pass (memories that disagree)."),
    Setting("loop.decay.enabled", bool, True, "Run the decay pass (archive what expired or nobody uses)."),
    Setting("loop.rollup.enabled", bool, False, "Run the belief roll-up pass (opt-in: summaries of related notes)."),
    Setting("loop.observe.importance", float, 0.6,
            "Importance of an observation the Observer writes (a user's own statement weighs a little above an "
            "average note, 0.5)."),
    Setting("loop.observe.batch", int, 16, "Chat turns and conversation memories the Observer sends a model per call."),
    Setting("loop.governor.max_writes_per_s", float, 50.0,
            "A tick waits while the Writer handles more requests per second than this (agents writing heavily; "
            "0: never waits for writes)."),
    Setting("loop.governor.max_load", float, 0.9,
            "A tick waits while the one-minute load average per core is above this (0: never waits for load)."),
    Setting("loop.decay.half_life_days", float, 90.0,
            "Days of non-use after which the decay pass counts a memory's importance as half (decay is computed "
            "at each tick, never stored)."),
    Setting("loop.decay.archive_below", float, 0.05,
            "The decay pass archives a memory whose decayed importance falls below this (0 archives nothing for "
            "decay; expiry still archives)."),
    Setting("loop.decay.min_idle_days", float, 30.0,
            "A memory used or written within this many days is never archived for decay, whatever its importance."),
    Setting("loop.decay.exempt_types", list, ["procedure", "config"],
            "Memory types that never decay (pinned memories never do; file chunks are re-indexing's). Expiry "
            "archives every type."),
    Setting("tasks.lease_s", float, 300.0, "Default lease of a claimed task; task_heartbeat renews it."),
    Setting("tasks.max_lease_s", float, 86400.0, "Longest lease a claim or heartbeat may ask for."),
    Setting("loop.rollup.types", list, ["note"],
            "Memory types the belief roll-up clusters (docs/cognitive-loop.md); each cluster is of one owner."),
    Setting("loop.rollup.min_similarity", float, 0.7,
            "Cosine (active model's stored vectors) above which two notes are related for the roll-up."),
    Setting("loop.rollup.min_cluster", int, 3, "Fewest related notes the roll-up summarises into a belief."),
    Setting("loop.rollup.max_cluster", int, 12, "Most notes one roll-up belief consolidates (the most central)."),
    Setting("loop.rollup.max_group", int, 2000,
            "Most recent notes of one owner the roll-up compares at once (its cost is quadratic in this)."),
    Setting("loop.rollup.max_summary_chars", int, 1200, "Longest text of a roll-up belief."),
    Setting("engine.mode", str, "engine",
            "engine: CLI, MCP stdio and `m3 serve` relay to one engine process per store, started on first use; "
            "embedded: every process runs its own actors on the store (Python applications, tests)."),
    Setting("engine.idle_exit_s", float, 1800.0,
            "An engine that has had no call for this long exits (0: never); the next call starts it again."),
    Setting("engine.start_timeout_s", float, 60.0, "Longest wait for a starting engine to listen."),
    Setting("engine.lease_retry_s", float, 5.0,
            "On a store several engines share (PostgreSQL), how often an engine without the background lease "
            "tries to take it: the longest a dead holder's background work waits for another engine."),
    Setting("serve.host", str, "127.0.0.1", "Address `m3 serve` listens on (remote MCP over Streamable HTTP)."),
    Setting("serve.port", int, 8080, "Port `m3 serve` listens on; 0 picks a free one."),
    Setting("serve.max_body_bytes", int, 4 * 1024 * 1024,
            "Largest request body `m3 serve` accepts (413 request_too_large, then the connection closes)."),
    Setting("serve.body_timeout_s", float, 30.0,
            "Longest time a client may take to send a whole request body to `m3 serve` (408 request_timeout, "
            "then the connection closes)."),
    Setting("serve.keep_alive_s", float, 5.0, "An idle keep-alive connection to `m3 serve` closes after this long."),
    Setting("dashboard.host", str, "127.0.0.1",
            "Address `m3 dashboard` listens on; off loopback it needs dashboard.token."),
    Setting("dashboard.port", int, 8088, "Port `m3 dashboard` listens on; 0 picks a free one."),
    Setting("dashboard.agent", str, "dashboard",
            "The agent every dashboard action runs as (recorded in history; isolation applies to it)."),
    Setting("dashboard.token", str, "",
            "The password a browser must give (HTTP Basic) when the dashboard listens off loopback.", secret=True),
    Setting("sync.warehouse_url", str, "",
            "PostgreSQL URL of the warehouse this SQLite store syncs with (docs/sync.md); empty: no sync. Keep it "
            "in the vault (`m3 secret set sync.warehouse_url`, the URL on stdin): one with a password in the file "
            "is refused.",
            secret=True),
    Setting("sync.interval_s", float, 3600.0, "Time between two background syncs with the warehouse."),
    Setting("sync.tables", list, [],
            "The tables that sync (docs/sync.md lists them); empty: all of them. Changes of a table left out wait "
            "here until it is put back."),
    Setting("sync.batch", int, 500, "Rows per pushed or pulled batch (each commits with its watermark)."),
)

_BY_KEY: dict[str, Setting] = {s.key: s for s in SETTINGS}


def setting(key: str) -> Setting:
    """The declaration of ``key``; :class:`ConfigError` when unknown."""
    try:
        return _BY_KEY[key]
    except KeyError:
        raise ConfigError(f"unknown setting {key!r}",
                          hint="Run `m3 config show` to list every setting.") from None


def parse_value(s: Setting, raw: Any) -> Any:
    """Convert ``raw`` (from TOML or an environment string) to the setting's type."""
    try:
        if s.type is bool:
            if isinstance(raw, bool):
                return raw
            text = str(raw).strip().lower()
            if text in {"1", "true", "yes", "on"}:
                return True
            if text in {"0", "false", "no", "off"}:
                return False
            raise ValueError(raw)
        if s.type is list:
            if isinstance(raw, list):
                return [str(v) for v in raw]
            return [part.strip() for part in str(raw).split(",") if part.strip()]
        if s.type is int and isinstance(raw, bool):
            raise ValueError(raw)
        return s.type(raw)
    except (TypeError, ValueError):
        raise ConfigError(
            f"setting {s.key} expects {s.type.__name__}, got {raw!r}",
            hint=f"Give a {s.type.__name__} value for {s.key}.",
        ) from None


def home_dir(env: Mapping[str, str]) -> Path:
    return Path(env.get("M3_HOME") or Path.home() / ".m3").expanduser()


def config_root(env: Mapping[str, str]) -> Path:
    explicit = env.get("M3_PATHS_CONFIG")
    return Path(explicit).expanduser() if explicit else home_dir(env) / "config"


class Config:
    """Resolved settings with their origins. Immutable once built."""

    def __init__(self, values: dict[str, Any], origins: dict[str, Origin], home: Path, file: Path):
        self._values = values
        self._origins = origins
        self.home = home
        self.file = file
        #: The old setting names this configuration was given (see :data:`RENAMED_SETTINGS`).
        self.deprecated: list[dict[str, str]] = []

    def __getitem__(self, key: str) -> Any:
        setting(key)
        return self._values[key]

    def origin(self, key: str) -> Origin:
        setting(key)
        return self._origins[key]

    @property
    def engine_root(self) -> Path:
        return Path(self._values["paths.engine"]).expanduser() if self._values["paths.engine"] else self.home / "engine"

    @property
    def logs_root(self) -> Path:
        return Path(self._values["paths.logs"]).expanduser() if self._values["paths.logs"] else self.home / "logs"

    def vault(self) -> Vault:
        """The encrypted secrets vault beside the config file, under this configuration's crypto policy."""
        return vault_of(self.file.parent, self._values["crypto.fips_mode"], self._values["crypto.key_source"])

    @property
    def run_root(self) -> Path:
        return Path(self._values["paths.run"]).expanduser() if self._values["paths.run"] else self.home / "run"

    @property
    def store_url(self) -> str:
        url: str = self._values["store.url"]
        return url or f"sqlite:///{self.engine_root / 'm3.db'}"

    def with_overrides(self, **overrides: Any) -> Config:
        """A copy with some values replaced (origin ``env``); keys use ``_`` for ``.``."""
        values = dict(self._values)
        origins = dict(self._origins)
        for name, raw in overrides.items():
            s = setting(name.replace("__", "."))
            values[s.key] = parse_value(s, raw)
            origins[s.key] = "env"
        return Config(values, origins, self.home, self.file)

    def rows(self) -> list[dict[str, Any]]:
        """Every setting as ``{key, value, origin, env}`` in declaration order; a secret that is set shows as
        ``<set, hidden>``, never its value."""
        return [{"key": s.key, "value": "<set, hidden>" if s.secret and self._values[s.key] else self._values[s.key],
                 "origin": self._origins[s.key], "env": s.env_var} for s in SETTINGS]


def _read_file(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}",
                          hint="Fix the file or remove it to fall back to defaults.") from None
    flat: dict[str, Any] = {}
    for section, table in data.items():
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: top-level key {section!r} must be a [section]",
                              hint="Settings are written as `[section]` then `name = value`.")
        flat.update(_flatten(section, table))
    return flat


def _flatten(prefix: str, table: dict[str, Any]) -> dict[str, Any]:
    """``[loop.governor]`` tables (and dotted keys) as ``loop.governor.<name>`` keys; a list value is a value."""
    flat: dict[str, Any] = {}
    for name, raw in table.items():
        if isinstance(raw, dict):
            flat.update(_flatten(f"{prefix}.{name}", raw))
        else:
            flat[f"{prefix}.{name}"] = raw
    return flat


def load_config(env: Mapping[str, str] | None = None, *, renamed: Mapping[str, str] | None = None) -> Config:
    """Resolve every setting from defaults, the config file and ``env`` (default ``os.environ``); a setting
    under an old name (``renamed``, default :data:`RENAMED_SETTINGS`) counts under its new one, with a warning."""
    env = os.environ if env is None else env
    file = config_root(env) / CONFIG_FILE_NAME
    from_file, env, deprecated = _upgrade(_read_file(file), env, RENAMED_SETTINGS if renamed is None else renamed)
    values: dict[str, Any] = {}
    origins: dict[str, Origin] = {}
    for key in from_file:
        _file_setting(key)
    early = {key: _early_value(key, env, from_file) for key in ("crypto.fips_mode", "crypto.key_source")}
    secrets = read_secrets(vault_of(file.parent, early["crypto.fips_mode"], early["crypto.key_source"]))
    for s in SETTINGS:
        if s.env_var in env:
            values[s.key], origins[s.key] = parse_value(s, env[s.env_var]), "env"
        elif s.key in secrets:
            values[s.key], origins[s.key] = parse_value(s, secrets[s.key]), "secret"
        elif s.key in from_file:
            values[s.key], origins[s.key] = parse_value(s, from_file[s.key]), "file"
        else:
            values[s.key], origins[s.key] = s.default, "default"
    values["paths.config"] = str(file.parent)
    config = Config(values, origins, home_dir(env), file)
    config.deprecated = deprecated
    return config


# -- renamed settings (docs/upgrading.md) ------------------------------------------------------------------

#: Old key → new key of every renamed setting; the old name keeps working (file and environment) with a
#: warning naming the new one, and `m3 doctor` lists both. None has been renamed yet.
RENAMED_SETTINGS: dict[str, str] = {}


def _upgrade(from_file: dict[str, Any], env: Mapping[str, str],
             renamed: Mapping[str, str]) -> tuple[dict[str, Any], Mapping[str, str], list[dict[str, str]]]:
    """The file's values and ``env`` with old setting names moved to the new ones (the new name wins); notes."""
    notes: list[dict[str, str]] = []
    upgraded_env = dict(env)
    for old, new in renamed.items():
        for where, values, old_name, new_name in (("file", from_file, old, new), (
                "env", upgraded_env, "M3_" + old.upper().replace(".", "_"), setting(new).env_var)):
            if old_name not in values:
                continue
            ignored = new_name in values
            values.setdefault(new_name, values.pop(old_name))
            message = f"setting {old_name} ({where}) was renamed {new_name}" + (
                f"; {new_name} is set too, so {old_name} is ignored" if ignored else f": use {new_name}")
            log.warning("%s", message)
            notes.append({"kind": "setting", "old": old_name, "new": new_name, "where": where, "message": message})
    return from_file, upgraded_env, notes


def _early_value(key: str, env: Mapping[str, str], from_file: dict[str, Any]) -> Any:
    """A setting needed to read the others (the crypto policy of the vault), from the environment or the file."""
    return parse_value(s := setting(key), env.get(s.env_var, from_file.get(key, s.default)))


def _file_setting(key: str) -> Setting:
    """The declaration of ``key``, which the config file may set: any but paths.config, which locates the file."""
    s = setting(key)
    if s.key == "paths.config":
        raise ConfigError("paths.config cannot be set in the file that it locates",
                          hint="Set M3_PATHS_CONFIG or M3_HOME in the environment instead.")
    return s


def _make_private_dirs(path: Path) -> None:
    """Create ``path`` and its missing parents (M3_HOME among them) 0700, as every folder m3 makes."""
    for folder in reversed([path, *path.parents]):
        if not folder.exists():
            folder.mkdir(mode=0o700, exist_ok=True)  # exist_ok: another process may race us


def _put(doc: Any, key: str, value: Any) -> Any:
    """``doc`` (a tomlkit document) with ``key = value`` under its ``[section]``, which is added if missing."""
    import tomlkit

    section, name = key.split(".", 1)
    if section not in doc:
        doc[section] = tomlkit.table()
    doc[section][name] = value
    return doc


def _replace_file(path: Path, text: str, mode: int) -> None:
    """Replace ``path`` with ``text`` atomically and durably; the new file has ``mode`` (less the umask) from its
    first byte, so a 0600 file is never readable by others, not even briefly."""
    _make_private_dirs(path.parent)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def set_in_file(config: Config, key: str, raw: str) -> Any:
    """Write ``key = raw`` into the config file, keeping its comments; return the parsed value."""
    import tomlkit

    s = _file_setting(key)
    value = parse_value(s, raw)
    path = config.file
    doc = tomlkit.parse(path.read_text(encoding="utf-8")) if path.exists() else tomlkit.document()
    _replace_file(path, tomlkit.dumps(_put(doc, s.key, value)), 0o666)
    return value


# -- secrets: the encrypted vault beside m3_config.toml (m3/crypto), and the plaintext file it replaces -----

def vault_of(config_dir: Path, fips_mode: bool = False, key_source: str = "auto") -> Vault:
    return Vault(config_dir, Provider(fips_mode), key_source)  # the policy: crypto.fips_mode, crypto.key_source


def secret_key(key: str) -> str:
    """``key`` when it names a secret setting; :class:`ConfigError` otherwise."""
    if not setting(key).secret:
        raise ConfigError(f"{key} is not a secret setting",
                          hint="Use `m3 config set` for it; secrets are settings such as store.url and embed.key.")
    return key


def read_secrets(vault: Vault) -> dict[str, Any]:
    """The secret settings in ``vault``, after moving a plaintext ``secrets.toml`` beside it into it."""
    migrate_plaintext(vault)
    values = vault.read_all() if vault.exists() else {}
    for key in values:
        secret_key(key)
    return values


def migrate_plaintext(vault: Vault) -> list[str]:
    """Move the plaintext ``secrets.toml`` of earlier versions into ``vault`` (see Vault.migrate_plaintext)."""
    return vault.migrate_plaintext(secret_key)


def set_secret(config: Config, key: str, raw: str | None) -> Path:
    """Store (or with ``raw=None`` remove) a secret setting in the vault; return the vault's path."""
    s = setting(secret_key(key))
    vault = config.vault()
    migrate_plaintext(vault)
    return vault.put({s.key: None if raw is None else str(parse_value(s, raw))})
