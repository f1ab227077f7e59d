"""Handlers of the ``files`` tools that read memory only: files_search, files_get, files_list, files_stats.

They read the store through the Searcher as the caller sees it (isolation as configured), never the disk, so
they need no access check beyond isolation: a path only names what to look up.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from m3.errors import NotFound
from m3.gateway.fileindex import access
from m3.gateway.fileindex.records import by_file, meta
from m3.gateway.tools.files import reader_filter
from m3.protocols.messages.files import FILE_CHUNK, FileChunkRow, ListFileChunks
from m3.protocols.messages.memory import SearchMemories
from m3.protocols.tools import files as p

if TYPE_CHECKING:
    from m3.gateway.service import CallContext, Service


async def files_search(svc: Service, a: p.FilesSearchArgs, ctx: CallContext) -> p.FilesSearchResult:
    prefix = str(access.resolve(a.path)) if a.path is not None else None
    flt = reader_filter(svc, ctx.agent_id).model_copy(update={"type": FILE_CHUNK, "source_prefix": prefix})
    found = await svc.ask(svc.system.searcher, SearchMemories(query=a.query, k=a.k, filter=flt, explain=a.explain))
    items = [p.FileSearchItem(
        id=item.id, path=item.metadata.get("path", ""), start_line=int(item.metadata.get("start_line", 0)),
        end_line=int(item.metadata.get("end_line", 0)), content=item.content, score=item.score,
        bm25_score=item.bm25_score, agent_id=item.agent_id, explanation=item.explanation,
    ) for item in found.items]
    return p.FilesSearchResult(count=len(items), items=items, query=a.query)


async def _rows(svc: Service, ctx: CallContext, path: str | None, *, with_content: bool = False
                ) -> list[FileChunkRow]:
    prefix = str(access.resolve(path)) if path is not None else None
    return await svc.ask(svc.system.searcher, ListFileChunks(filter=reader_filter(svc, ctx.agent_id), prefix=prefix,
                                                             with_content=with_content))


async def files_get(svc: Service, a: p.FilesGetArgs, ctx: CallContext) -> p.FilesGetResult:
    path = str(access.resolve(a.path))
    rows = [row for row in await _rows(svc, ctx, a.path, with_content=True) if row.source == path]
    if not rows:
        raise NotFound(f"no indexed file at {a.path} that you can see", details={"path": a.path},
                       hint="files_list shows the indexed files; files_index adds one.")
    # Two agents may each have indexed the file: the reader's own chunks first, else the first owner's.
    owners = sorted({row.agent_id or "" for row in rows}, key=lambda o: (o != (ctx.agent_id or ""), o))
    mine = [row for row in rows if (row.agent_id or "") == owners[0]]
    return p.FilesGetResult(
        path=path, file_hash=meta(mine[0], "file_hash"), indexed_at=mine[0].recorded_at, count=len(mine),
        chunks=[p.FileChunkItem(id=row.id, chunk=int(meta(row, "chunk", 0)), start_line=int(meta(row, "start_line", 0)),
                                end_line=int(meta(row, "end_line", 0)), content=row.content or "") for row in mine])


async def files_list(svc: Service, a: p.FilesListArgs, ctx: CallContext) -> p.FilesListResult:
    files = _entries(await _rows(svc, ctx, a.path))
    return p.FilesListResult(count=min(len(files), a.limit), files=files[:a.limit], truncated=len(files) > a.limit)


async def files_stats(svc: Service, a: p.FilesStatsArgs, ctx: CallContext) -> p.FilesStatsResult:
    rows = await _rows(svc, ctx, a.path)
    files = _entries(rows)
    extensions: dict[str, int] = {}
    for entry in files:
        ext = PurePosixPath(entry.path).suffix.lower()
        extensions[ext] = extensions.get(ext, 0) + 1
    return p.FilesStatsResult(
        files=len(files), chunks=len(rows), bytes=sum(e.size or 0 for e in files),
        roots=sorted({e.root for e in files if e.root}), by_extension=dict(sorted(extensions.items())),
        last_indexed_at=max((row.recorded_at for row in rows), default=None))


def _entries(rows: list[FileChunkRow]) -> list[p.FileEntry]:
    """One entry per (path, owner), by path."""
    out: list[p.FileEntry] = []
    for path, chunks in by_file(rows).items():
        owners: dict[str | None, list[FileChunkRow]] = {}
        for row in chunks:
            owners.setdefault(row.agent_id, []).append(row)
        for owner, own in sorted(owners.items(), key=lambda item: item[0] or ""):
            first = own[0]
            mtime = meta(first, "mtime")
            out.append(p.FileEntry(
                path=path, root=meta(first, "root"), size=meta(first, "size"), chunks=len(own),
                file_hash=meta(first, "file_hash"), indexed_at=max(row.recorded_at for row in own),
                modified_at=datetime.fromtimestamp(mtime, UTC) if isinstance(mtime, int | float) else None,
                scope=first.scope, agent_id=owner))
    return out
