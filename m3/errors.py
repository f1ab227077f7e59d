"""One exception tree for m3.

Every error a caller can see is an :class:`M3Error` with a stable ``code``
(snake_case, never renamed once released), a human ``message`` and a
``hint`` that says what to do next. The gateway translates these once into
MCP tool errors, CLI ``{"error": {...}}`` documents and HTTP responses; no
other layer formats errors. ``http_status`` is the status of the HTTP routes
(``/v1/tools/{name}``) for the error; a subclass inherits its parent's, and
only the base (``internal_error``) is 500.
"""

from __future__ import annotations

from typing import Any, ClassVar


class M3Error(Exception):
    """Base of every error m3 reports to a caller."""

    code: ClassVar[str] = "internal_error"
    default_hint: ClassVar[str] = "This is a bug in m3; please report it with the log file."
    #: True when the caller (a model or a user) can fix the call and retry.
    fixable: ClassVar[bool] = False
    #: The HTTP status of the tool routes for this error (docs/http.md).
    http_status: ClassVar[int] = 500

    def __init__(self, message: str, *, hint: str | None = None, details: dict[str, Any] | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint or self.default_hint
        self.details = details or {}

    def to_dict(self) -> dict[str, Any]:
        """The wire form: ``{"code", "message", "hint"}`` plus ``details`` when present."""
        body: dict[str, Any] = {"code": self.code, "message": self.message, "hint": self.hint}
        if self.details:
            body["details"] = self.details
        return body


class InvalidArgument(M3Error):
    code = "invalid_argument"
    default_hint = "Check the argument against the tool's schema and call again."
    fixable = True
    http_status = 400


class UnknownMemoryType(InvalidArgument):
    code = "unknown_memory_type"
    default_hint = "Use one of the memory types listed in details.allowed."


class ContentTooLarge(InvalidArgument):
    code = "content_too_large"
    default_hint = "Split the content into several memories or raise limits.max_content_chars."
    http_status = 413


class FieldTooLarge(InvalidArgument):
    code = "field_too_large"
    default_hint = ("Shorten the field named in details.field to details.limit (details.unit) or less, or raise the "
                    "matching limits.* setting.")
    http_status = 413  # like content_too_large: the request carries more than the server accepts


class InvalidTime(InvalidArgument):
    code = "invalid_time"
    default_hint = "Give an ISO-8601 time such as 2026-11-30T12:00:00Z."


class NotFound(M3Error):
    code = "not_found"
    default_hint = "Check the id; memory_search or memory_get with an 8-character prefix can find it."
    fixable = True
    http_status = 404


class AmbiguousId(InvalidArgument):
    code = "ambiguous_id"
    default_hint = "The prefix matches several ids; give more characters or the full id."


class UnknownTool(InvalidArgument):
    code = "unknown_tool"
    default_hint = "Call m3_index or tools_list_domains to see the tool names."
    http_status = 404


class UnknownDomain(InvalidArgument):
    code = "unknown_domain"
    default_hint = "Call tools_list_domains to see the domains."
    http_status = 404


class ConfirmationRequired(InvalidArgument):
    code = "confirmation_required"
    default_hint = "Hard deletion is permanent; repeat the call with confirm=true if that is intended."


class NotRetired(InvalidArgument):
    code = "not_retired"
    default_hint = ("Only a superseded, soft-deleted or archived memory can be restored; memory_history lists its "
                    "versions and events.")


class NotASummary(InvalidArgument):
    code = "not_a_summary"
    default_hint = ("Only a belief written by the roll-up pass can be unconsolidated; memory_graph shows which "
                    "belief consolidates a note.")


class Conflict(M3Error):
    code = "conflict"
    default_hint = "The record changed since you read it; read it again and retry."
    fixable = True
    http_status = 409


class ConfigError(M3Error):
    code = "config_error"
    default_hint = "Run `m3 config show --origin` to see every setting and where it came from."
    fixable = True
    http_status = 503  # the server is misconfigured: no call can succeed until an operator acts


class Unavailable(M3Error):
    code = "unavailable"
    default_hint = "A component of m3 is restarting or overloaded; retry in a moment."
    http_status = 503


class Timeout(Unavailable):
    code = "timeout"
    default_hint = "m3 did not answer in time; retry, and check `m3 embedder status` if it persists."
    http_status = 504


class EmbedderUnavailable(Unavailable):
    code = "embedder_unavailable"
    default_hint = "Check the embedder configuration with `m3 embedder status`."


class LlmError(Unavailable):
    code = "llm_error"
    default_hint = ("Check llm.url, llm.model and llm.key (`m3 config show --origin`) and that the endpoint answers "
                    "/v1/chat/completions; the cognitive loop uses its deterministic rules meanwhile.")
    http_status = 502


class Interrupted(M3Error):
    code = "interrupted"
    default_hint = ("The command was stopped (Ctrl-C or a signal) before it finished; what it had not committed "
                    "was not stored. Run it again.")
    http_status = 503  # stopped by a signal before it finished: the same call can succeed when run again


class StoreError(M3Error):
    code = "store_error"
    default_hint = "Check that the database is reachable and writable; see the log file for details."
    http_status = 503


class DownloadFailed(Unavailable):
    code = "download_failed"
    default_hint = ("Check the internet connection (or set HF_ENDPOINT to a mirror) and run the command again; "
                    "it resumes. Or copy the files listed in details.files into details.dir by hand.")


# -- PostgreSQL store (issue 4) --------------------------------------------------------------------

class ExtraNotInstalled(ConfigError):
    code = "extra_not_installed"
    default_hint = 'Install PostgreSQL support with `pip install "m3-memory[postgres]"`.'


class EmbeddedPostgresError(StoreError):
    code = "embedded_postgres_error"
    default_hint = "See server.log in the embedded cluster's data directory (`m3 postgres status` names it)."


# --- coordination (agents, inboxes, tasks, tokens) ----------------------------------------------

class Forbidden(M3Error):
    code = "forbidden"
    default_hint = "Calls through a token act as the token's agent: omit agent_id or give your own."
    fixable = True
    http_status = 403


class NotShared(InvalidArgument):
    code = "not_shared"
    default_hint = ("With isolation on, a scope=agent memory is private to its agent; write what you share with "
                    "scope 'user' or 'org'.")
    http_status = 403


class IllegalTransition(InvalidArgument):
    code = "illegal_transition"
    default_hint = "Move the task only to one of the states listed in details.allowed."
    http_status = 409


class LeaseLost(Conflict):
    code = "lease_lost"
    default_hint = "The lease ran out or another agent holds the task now; claim a task again with task_claim."


class LeaseHeld(Conflict):
    code = "lease_held"
    default_hint = ("Another agent holds this task under a valid lease: only the holder may update it, set its result "
                    "or delete it until the lease ends (details.owner, details.lease_expires_at).")


# --- admin (export, import) -----------------------------------------------------------------------

class InvalidExport(InvalidArgument):
    code = "invalid_export"
    default_hint = ("Give a file written by admin_export (`m3 store export`): JSON Lines, a header line first; "
                    "details.line says where it went wrong. Nothing was imported.")


class ExportRevisionMismatch(InvalidArgument):
    code = "export_revision_mismatch"
    default_hint = ("The file was exported from a store at an older schema revision: open that store with this "
                    "m3 once (it migrates on open), export it again and import the new file. Nothing was imported.")
    http_status = 409


class ExportTooNew(ExportRevisionMismatch):
    code = "export_too_new"
    default_hint = ("The file comes from a newer m3 (details.revision is unknown to this one): upgrade m3 here "
                    "and import again. Nothing was imported.")


class StoreNotEmpty(Conflict):
    code = "store_not_empty"
    default_hint = ("admin_import fills an empty store (details.tables lists what this one holds): import into a "
                    "new store, or pass merge=true to add only the rows whose ids are not here yet.")


# --- HTTP (m3 serve) ------------------------------------------------------------------------------

class Unauthorized(M3Error):
    code = "unauthorized"
    default_hint = ("Send `Authorization: Bearer <token>` with a token from `m3 token create --agent NAME`; "
                    "a revoked token no longer works.")
    fixable = True
    http_status = 401


class RequestTooLarge(InvalidArgument):
    code = "request_too_large"
    default_hint = "Send a smaller request body (the limit is serve.max_body_bytes)."
    http_status = 413


class RequestTimeout(InvalidArgument):
    code = "request_timeout"
    default_hint = "Send the whole request body within serve.body_timeout_s."
    http_status = 408


class AddressInUse(ConfigError):
    code = "address_in_use"
    default_hint = "Another process listens on that address: stop it, or choose another port with --port or serve.port."


# --- m3 setup (agent clients' configuration files) ------------------------------------------------

class ClientConfigMalformed(ConfigError):
    code = "client_config_malformed"
    default_hint = ("The agent client's configuration file (details.file) cannot be read as its client reads it; fix "
                    "it by hand (a backup may sit beside it), or leave that client out with --client. Nothing was "
                    "written to any file.")


class ClientConfigUnwritable(ConfigError):
    code = "client_config_unwritable"
    default_hint = "Check that you own details.file and its folder and that the disk is not full, then run it again."


class ClientConfigChanged(Conflict):
    code = "client_config_changed"
    default_hint = ("The client rewrote its configuration file (details.file) while m3 setup ran; the files written "
                    "before it keep their backups. Run m3 setup again (it skips what is already done).")


# --- secrets and FIPS mode (docs/governance.md) -------------------------------------------------

class SecretTampered(ConfigError):
    code = "secret_tampered"
    default_hint = ("The vault (secrets.vault) was changed outside m3 or is damaged: restore it from a backup, or "
                    "remove it and set the secrets again with `m3 secret set`.")


class SecretKeyUnavailable(ConfigError):
    code = "secret_key_unavailable"
    default_hint = "Restore the vault's key (secrets.key, or the OS keyring entry named in the message)."


class FipsUnavailable(ConfigError):
    code = "fips_unavailable"
    default_hint = ("crypto.fips_mode needs cryptography linked against an OpenSSL running a FIPS provider "
                    "(docs/governance.md); turn crypto.fips_mode off or install such a build.")


# --- warehouse sync (docs/sync.md) ----------------------------------------------------------------

class SyncNotConfigured(ConfigError):
    code = "sync_not_configured"
    default_hint = ("Keep the warehouse's URL in the vault: `printf %s 'postgresql+psycopg://user:password@host/db' | "
                    "m3 secret set sync.warehouse_url`, then run `m3 sync now` (docs/sync.md).")


class SyncUnsupported(ConfigError):
    code = "sync_unsupported"
    default_hint = ("Sync is for SQLite stores; a PostgreSQL store is already shared by every machine that reaches "
                    "it (docs/sync.md, \"Two cross-machine setups\").")


class WarehouseUnavailable(Unavailable):
    code = "warehouse_unavailable"
    default_hint = ("The warehouse did not answer or failed mid-batch; nothing half-done stays. Check the URL and "
                    "that PostgreSQL runs, then `m3 sync now` again: the sync resumes where it stopped.")


# --- the engine (one per store, docs/architecture.md) -----------------------------------------------

class EngineUnavailable(Unavailable):
    code = "engine_unavailable"
    default_hint = ("The store's engine could not be started or went away during the call; see its log "
                    "(`m3 engine status` names it) and run the command again.")


class EngineVersionMismatch(Unavailable):
    code = "engine_version_mismatch"
    default_hint = ("The running engine is another m3 version and is busy, so it was not restarted: run "
                    "`m3 engine stop` once its calls are done (or wait until it is idle), then call again.")
    http_status = 409


class EngineSettingsMismatch(EngineVersionMismatch):
    code = "engine_settings_mismatch"
    default_hint = ("The running engine was started with other settings (the store's, the embedder's, search or "
                    "isolation) and is busy, so it was not restarted: run `m3 engine stop` once its calls are done, "
                    "then call again; settings are the engine's, not each command's.")


def all_error_classes() -> list[type[M3Error]]:
    """Every error class, breadth-first from the base; used to generate docs/errors.md."""
    classes: list[type[M3Error]] = [M3Error]
    for cls in classes:  # the list grows while it is walked: each class's subclasses join its end
        classes.extend(sub for sub in cls.__subclasses__() if sub not in classes)
    return classes
