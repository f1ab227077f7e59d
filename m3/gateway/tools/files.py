"""Handlers of the ``files`` tools that read the disk: files_index, files_reindex, files_status, files_forget,
and memory_write_from_file.

The disk is read here, in a worker thread (the trio loop never blocks on it), after the access rules of
:mod:`m3.gateway.fileindex.access`; what is in memory comes from the Searcher, and every change goes to the
Writer as :class:`IndexFiles` requests of up to :data:`BATCH_CHUNKS` chunks, each one transaction in which a
file's old chunks retire and its new ones appear together (docs/files.md).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from m3.errors import ContentTooLarge, InvalidArgument, NotFound
from m3.gateway.fileindex import access, scan
from m3.gateway.fileindex.records import chunk_memories
from m3.gateway.registry import acting
from m3.protocols.messages.files import FilesApplied, IndexFiles, ListFileChunks
from m3.protocols.messages.memory import MemoryFilter, NewMemory, WriteMemory
from m3.protocols.tools import files as p

if TYPE_CHECKING:
    from m3.gateway.service import CallContext, Service

#: The most chunks one IndexFiles request carries (a file with more goes alone): a folder of 500 small files
#: is a few transactions, not 500.
BATCH_CHUNKS = 500


def reader_filter(svc: Service, reader: str | None) -> MemoryFilter:
    """What ``reader`` may see of memories: isolation as configured."""
    return MemoryFilter(reader_agent_id=reader, enforce_isolation=svc.config["isolation.enforce"])


def readable(svc: Service, ctx: CallContext, path: str) -> Path:
    """``path`` resolved, once the caller may read it (:func:`access.check_readable`) and it exists."""
    real = access.resolve(path)
    access.check_readable(real, bound=ctx.bound, roots=svc.config["files.roots"], shown=path)
    access.must_exist(real, path)
    return real


async def files_index(svc: Service, a: p.FilesIndexArgs, ctx: CallContext) -> p.FilesIndexResult:
    return await _index(svc, a, ctx, force=False)


async def files_reindex(svc: Service, a: p.FilesIndexArgs, ctx: CallContext) -> p.FilesIndexResult:
    return await _index(svc, a, ctx, force=True)


async def files_status(svc: Service, a: p.FilesStatusArgs, ctx: CallContext) -> p.FilesIndexResult:
    owner = acting(ctx, a.agent_id)
    target = readable(svc, ctx, a.path)
    planned = await _plan(svc, target, owner, list(a.ignore), force=False)
    return _result(target, planned, {}, FilesApplied(written=0, retired=0), dry_run=True)


async def _plan(svc: Service, target: Path, owner: str, patterns: list[str], *, force: bool) -> scan.Plan:
    rows = await svc.ask(svc.system.searcher, ListFileChunks(filter=reader_filter(svc, owner), prefix=str(target),
                                                             owner=owner))
    known = scan.known_files(rows)
    return await trio.to_thread.run_sync(functools.partial(
        scan.plan, target, known, patterns=patterns, max_bytes=svc.config["files.max_file_bytes"],
        max_files=svc.config["files.max_files"], force=force))


async def _index(svc: Service, a: p.FilesIndexArgs, ctx: CallContext, *, force: bool) -> p.FilesIndexResult:
    owner = acting(ctx, a.agent_id)
    target = readable(svc, ctx, a.path)
    planned = await _plan(svc, target, owner, list(a.ignore), force=force)
    root = target if target.is_dir() else target.parent
    chunks = {str(ft.path): chunk_memories(ft, root=root, owner=owner, scope=a.scope,
                                           chunk_chars=svc.config["files.chunk_chars"],
                                           overlap_lines=svc.config["files.chunk_overlap_lines"])
              for ft in planned.changed}
    total = FilesApplied(written=0, retired=0)
    reason = "reindexed" if force else "changed on disk"
    for memories, paths in _batches(chunks, planned.new):
        done = await svc.ask(svc.system.writer, IndexFiles(chunks=tuple(memories), retire_paths=tuple(paths),
                                                           agent_id=owner, actor=owner, reason=reason))
        total = _add(total, done)
    if planned.gone:
        done = await svc.ask(svc.system.writer, IndexFiles(retire_paths=tuple(planned.gone), agent_id=owner,
                                                           actor=owner, reason="gone from disk or ignored"))
        total = _add(total, done)
    return _result(target, planned, {path: len(m) for path, m in chunks.items()}, total, dry_run=False)


def _batches(chunks: dict[str, list[NewMemory]], new: set[str]) -> list[tuple[list[NewMemory], list[str]]]:
    """Whole files grouped into requests of at most :data:`BATCH_CHUNKS` chunks, with the paths each retires."""
    out: list[tuple[list[NewMemory], list[str]]] = []
    memories: list[NewMemory] = []
    paths: list[str] = []
    for path, mems in chunks.items():
        if memories and len(memories) + len(mems) > BATCH_CHUNKS:
            out.append((memories, paths))
            memories, paths = [], []
        memories += mems
        if path not in new:
            paths.append(path)
    if memories or paths:
        out.append((memories, paths))
    return out


def _add(a: FilesApplied, b: FilesApplied) -> FilesApplied:
    return FilesApplied(written=a.written + b.written, retired=a.retired + b.retired)


def _result(target: Path, planned: scan.Plan, counts: dict[str, int], applied: FilesApplied, *,
            dry_run: bool) -> p.FilesIndexResult:
    items = [p.FileChange(path=str(ft.path), change="new" if str(ft.path) in planned.new else "changed",
                          chunks=counts.get(str(ft.path), 0)) for ft in planned.changed]
    items += [p.FileChange(path=path, change="forgotten", chunks=0) for path in planned.gone]
    return p.FilesIndexResult(
        path=str(target), new=len(planned.new), changed=len(planned.changed) - len(planned.new),
        unchanged=planned.unchanged, forgotten=len(planned.gone), chunks_written=applied.written,
        chunks_retired=applied.retired, skipped=dict(sorted(planned.skipped.items())), items=items[:p.MAX_LISTED],
        dry_run=dry_run)


async def files_forget(svc: Service, a: p.FilesForgetArgs, ctx: CallContext) -> p.FilesForgetResult:
    # Reads no disk (the file may be gone): only the caller's own chunks are looked up and retired.
    owner = acting(ctx, a.agent_id)
    target = access.resolve(a.path)
    rows = await svc.ask(svc.system.searcher, ListFileChunks(filter=reader_filter(svc, owner), prefix=str(target),
                                                             owner=owner))
    paths = sorted({row.source for row in rows})
    if not paths:
        raise NotFound(f"nothing of yours is indexed at {a.path}", details={"path": a.path},
                       hint="files_list shows the indexed files.")
    done = await svc.ask(svc.system.writer, IndexFiles(retire_paths=tuple(paths), agent_id=owner, actor=owner,
                                                       reason=a.reason or "forgotten (files_forget)"))
    return p.FilesForgetResult(path=str(target), files=len(paths), chunks_retired=done.retired)


async def memory_write_from_file(svc: Service, a: p.MemoryWriteFromFileArgs, ctx: CallContext
                                 ) -> p.MemoryWriteFromFileResult:
    owner = acting(ctx, a.agent_id)
    target = readable(svc, ctx, a.path)
    if not target.is_file():
        raise InvalidArgument(f"{a.path} is not a file", details={"path": a.path},
                              hint="Name one file; files_index takes folders.")
    text = await trio.to_thread.run_sync(_read_text, target, svc.config["files.max_file_bytes"])
    lines = text.splitlines(keepends=True)
    start, end = a.start_line or 1, min(a.end_line or len(lines), len(lines))
    if start > len(lines):
        raise InvalidArgument(f"{a.path} has {len(lines)} lines; start_line is {start}",
                              details={"path": a.path, "lines": len(lines)})
    content = "".join(lines[start - 1:end])
    if not content.strip():
        raise InvalidArgument(f"lines {start}-{end} of {a.path} are blank", details={"path": a.path})
    most = svc.limits["limits.max_content_chars"]
    if len(content) > most:
        raise ContentTooLarge(f"lines {start}-{end} of {a.path} hold {len(content)} characters; the limit is {most}",
                              hint="Give a narrower start_line and end_line, or raise limits.max_content_chars.",
                              details={"size": len(content), "limit": most, "setting": "limits.max_content_chars"})
    written = await svc.ask(svc.system.writer, WriteMemory(
        type=a.type, content=content, title=a.title or f"{target.name}:{start}-{end}",
        metadata={**a.metadata, "path": str(target), "start_line": start, "end_line": end}, scope=a.scope,
        agent_id=owner, user_id=ctx.user_id, importance=a.importance, source=str(target), actor=owner))
    return p.MemoryWriteFromFileResult(**written.model_dump(), path=str(target), start_line=start, end_line=end)


def _read_text(path: Path, max_bytes: int) -> str:
    size = path.stat().st_size
    if size > max_bytes:
        raise InvalidArgument(f"{path} has {size} bytes; files over {max_bytes} are not read",
                              hint="Raise files.max_file_bytes.", details={"path": str(path), "size": size,
                                                                             "setting": "files.max_file_bytes"})
    text = scan.decode(path.read_bytes())
    if text is None:
        raise InvalidArgument(f"{path} is a binary file, not text", details={"path": str(path), "reason": "binary"},
                              hint="Only text files (Markdown, text, code) can become memories.")
    return text
