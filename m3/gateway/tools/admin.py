"""Handlers of the admin tools: export and import files, integrity, maintenance, embeddings, the engine.

Every one first checks :func:`local_only`: the admin domain is the local OS user's (docs/governance.md). The
files are read and written here, in the process that answers (the engine), by absolute path; the rows
come from the Searcher's snapshot and go to the Writer's one transaction.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from m3 import __version__
from m3.actors import bridge
from m3.actors.embedder import Backfill
from m3.embed.factory import configured_model
from m3.errors import ExportRevisionMismatch, ExportTooNew, Forbidden, InvalidArgument, InvalidExport, M3Error
from m3.gateway.store_commands import where_of
from m3.protocols.messages import admin as msg
from m3.protocols.messages.memory import EmbeddingStats, Flush
from m3.protocols.tools import admin as p
from m3.protocols.tools.meta import NoArgs
from m3.store import dump
from m3.store.migrations import HEAD

if TYPE_CHECKING:
    from m3.gateway.service import CallContext, Service


#: How long an admin request may take (a whole store is read, written or vacuumed): an answer that came too late
#: for ``actors.ask_timeout_s`` would tell the caller "timeout" about an import the Writer then commits.
ADMIN_ASK_TIMEOUT_S = 3600.0


async def long_ask(svc: Service, handle: Any, request: Any) -> Any:
    return await bridge.ask(handle, request, max(svc.timeout, ADMIN_ASK_TIMEOUT_S))


def local_only(tool: str, ctx: CallContext) -> None:
    """Refuse a caller bound by a token: the admin tools act on the whole store, beyond any one agent."""
    if ctx.bound:
        raise Forbidden(f"{tool} is an admin tool: only the local user may call it, not an agent bound by a token",
                        hint="Run it on the machine of the store, e.g. `m3 admin " + tool.removeprefix("admin_")
                             + "` or `m3 store export|import`; remote agents cannot export, import or maintain "
                               "the store.", details={"agent_id": ctx.agent_id})


def absolute(path: str) -> Path:
    where = Path(path).expanduser()
    if not where.is_absolute():
        raise InvalidArgument(f"{path!r} is not an absolute path",
                              hint="Give the full path: the file is read or written by the engine process, whose "
                                   "working directory is not yours (the CLI resolves it for you).")
    return where


# -- export, import -----------------------------------------------------------------------------

async def admin_export(svc: Service, a: p.AdminExportArgs, ctx: CallContext) -> p.AdminExportResult:
    local_only("admin_export", ctx)
    target = absolute(a.path)
    if target.exists() and not a.overwrite:
        raise InvalidArgument(f"{target} exists", hint="Pass overwrite=true to replace it, or choose another path.")
    if not target.parent.is_dir():
        raise InvalidArgument(f"{target.parent} is not a directory", hint="Create the directory first.")
    header = {"m3_version": __version__, "backend": where_of(svc.config)["backend"],
              "exported_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    # The reads recorded so far reach the Writer, and what it holds commits, before the snapshot is taken.
    await svc.ask(svc.system.audit_keeper, Flush())
    await svc.ask(svc.system.writer, Flush())
    done: msg.ExportedStore = await long_ask(svc, svc.system.searcher, msg.ExportStore(header=header))
    try:
        size = write_private(target, done["lines"])
    except OSError as exc:
        raise InvalidArgument(f"cannot write {target}: {exc.strerror or type(exc).__name__}",
                              hint="Choose a path in a directory you may write to.") from None
    return p.AdminExportResult(path=str(target), bytes=size, revision=done["revision"],
                               rows=sum(done["tables"].values()), tables=done["tables"])


def write_private(target: Path, lines: list[str]) -> int:
    """Write ``lines`` to ``target`` owner-only (0600), whole or not at all (a temporary file renamed); its size."""
    part = target.with_name(f".{target.name}.{os.getpid()}.part")
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            for line in lines:
                out.write(line)
                out.write("\n")
            out.flush()
            os.fsync(out.fileno())
        os.replace(part, target)
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    return target.stat().st_size


def read_export(path: str) -> tuple[Path, dict[str, Any], dict[str, list[dict[str, Any]]]]:
    """The file's path, header and decoded rows; :class:`InvalidExport` when it cannot be one."""
    source = absolute(path)
    try:
        with source.open(encoding="utf-8") as lines:
            header, tables = dump.parse_lines(iter(lines))
    except FileNotFoundError:
        raise InvalidArgument(f"{source} does not exist", hint="Give the path of a file admin_export wrote.") from None
    except (UnicodeDecodeError, OSError) as exc:
        raise InvalidExport(f"{source} cannot be read as an export: {type(exc).__name__}",
                            details={"line": None}) from None
    return source, header, tables


def check_revision(header: dict[str, Any]) -> None:
    """Refuse a file of another schema revision: newer (unknown here) or older (migrate it first)."""
    revision = header["revision"]
    if revision == HEAD:
        return
    details = {"revision": revision, "head": HEAD, "m3_version": header.get("m3_version")}
    if revision not in known_revisions():
        raise ExportTooNew(f"the file is of schema revision {revision!r}, newer than this m3's {HEAD!r}",
                           details=details)
    raise ExportRevisionMismatch(f"the file is of the older schema revision {revision!r}; this store is at {HEAD!r}",
                                 details=details)


def known_revisions() -> set[str]:
    """Every revision of this m3's migrations (Alembic's script directory)."""
    from alembic.script import ScriptDirectory

    scripts = ScriptDirectory(str(Path(dump.__file__).parent / "migrations"))
    return {script.revision for script in scripts.walk_revisions()}


async def admin_import(svc: Service, a: p.AdminImportArgs, ctx: CallContext) -> p.AdminImportResult:
    local_only("admin_import", ctx)
    source, header, tables = read_export(a.path)
    check_revision(header)
    rows = {name: tuple(items) for name, items in tables.items()}
    done: msg.ImportedRows = await long_ask(svc, svc.system.writer, msg.ImportStore(tables=rows, merge=a.merge))
    return p.AdminImportResult(path=str(source), revision=header["revision"], merged=a.merge,
                               rows=sum(done["imported"].values()), imported=done["imported"],
                               skipped=done["skipped"])


async def admin_export_inspect(svc: Service, a: p.AdminPathArgs, ctx: CallContext) -> p.AdminExportInspectResult:
    local_only("admin_export_inspect", ctx)
    source, header, _tables = read_export(a.path)
    problem: dict[str, Any] | None = None
    try:
        check_revision(header)
    except M3Error as exc:
        problem = exc.to_dict()
    return p.AdminExportInspectResult(
        path=str(source), m3_version=header.get("m3_version"), revision=header["revision"],
        exported_at=header.get("exported_at"), backend=header.get("backend"), tables=header.get("tables") or {},
        importable=problem is None, problem=problem)


# -- integrity, maintenance -------------------------------------------------------------------

async def admin_verify(svc: Service, a: p.AdminVerifyArgs, ctx: CallContext) -> p.AdminVerifyResult:
    local_only("admin_verify", ctx)
    rows = await long_ask(svc, svc.system.searcher, msg.VerifyStore(full=a.full))
    rows += await long_ask(svc, svc.system.writer, msg.VerifyFulltext())
    checks = [p.VerifyCheck(**row) for row in rows]
    problems = sum(1 for c in checks if c.status != "ok")
    return p.AdminVerifyResult(ok=all(c.status != "fail" for c in checks), problems=problems, checks=checks)


async def admin_optimise(svc: Service, a: p.AdminOptimiseArgs, ctx: CallContext) -> p.AdminOptimiseResult:
    local_only("admin_optimise", ctx)
    begun = time.monotonic()
    request = msg.OptimiseStore(vacuum=a.vacuum, rebuild_fulltext=a.rebuild_fulltext)
    statements: list[str] = await long_ask(svc, svc.system.writer, request)
    return p.AdminOptimiseResult(backend=where_of(svc.config)["backend"], statements=statements,
                                 seconds=round(time.monotonic() - begun, 3))


# -- embeddings -----------------------------------------------------------------------------------

async def admin_embedding_backlog(svc: Service, a: p.AdminBacklogArgs, ctx: CallContext) -> p.AdminBacklogResult:
    local_only("admin_embedding_backlog", ctx)
    model = configured_model(svc.config)
    rows = await svc.ask(svc.system.searcher, msg.EmbeddingBacklog(models=(model,), limit=a.limit))
    return p.AdminBacklogResult(configured_model=model, models=[p.ModelBacklog(**row) for row in rows])


async def admin_reembed(svc: Service, a: p.AdminReembedArgs, ctx: CallContext) -> p.AdminReembedResult:
    """The Embedder's ordinary backlog, as `m3 embedder reembed` (m3/gateway/reembed.py) uses it, without waiting."""
    local_only("admin_reembed", ctx)
    model = svc.system.embedder_backend.model_id
    if a.model is not None and a.model != model:
        raise InvalidArgument(f"m3 embeds for the configured model {model!r}, not {a.model!r}",
                              hint="Set embed.model (`m3 config set embed.model …`), restart the engine "
                                   "(`m3 engine stop`), then call admin_reembed again.")
    svc.system.embedder.tell(Backfill())
    stats = await svc.ask(svc.system.searcher, EmbeddingStats(model=model))
    return p.AdminReembedResult(model=model, active_model=stats["active_model"], memories=stats["memories"],
                                pending=stats["pending"], started=svc.system.background)


# -- the engine ---------------------------------------------------------------------------------

async def admin_engine_status(svc: Service, a: NoArgs, ctx: CallContext) -> p.AdminEngineStatusResult:
    local_only("admin_engine_status", ctx)
    if svc.engine_status is None:
        return p.AdminEngineStatusResult(
            mode="embedded", pid=os.getpid(), version=__version__, uptime_s=round(time.time() - svc.started, 3),
            socket=None, inflight=None, requests=None, idle_exit_s=None, frontends=None,
            background={"embedding_backlog": svc.system.background})
    state = svc.engine_status()
    shown = {"pid", "version", "uptime_s", "socket", "inflight", "requests", "idle_exit_s", "frontends"}
    background = {k: v for k, v in state.items() if k not in shown | {"settings", "store_key", "log", "started_at",
                                                                       "idle_s"}}
    return p.AdminEngineStatusResult(
        mode="engine", pid=state["pid"], version=state["version"], uptime_s=state["uptime_s"],
        socket=state["socket"], inflight=state["inflight"], requests=state["requests"],
        idle_exit_s=state["idle_exit_s"], frontends=state.get("frontends"),
        background=json.loads(json.dumps(background, default=str)))
