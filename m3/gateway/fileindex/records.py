"""File chunks as memories: the rows files_index writes, and what the files tools read back from them.

A chunk is a memory of type ``file_chunk``: ``source`` the file's resolved path, ``title`` its path relative
to the indexed folder with its line span (so the title signal of search matches file names), ``content`` the
lines as they are, and ``metadata`` the keys of :data:`KEYS`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from m3.gateway.fileindex.chunking import MARKDOWN_SUFFIXES, chunk_text
from m3.gateway.fileindex.scan import FileText
from m3.protocols.messages.files import FILE_CHUNK, FileChunkRow
from m3.protocols.messages.memory import NewMemory

#: The metadata every chunk carries.
KEYS = ("path", "root", "rel", "start_line", "end_line", "chunk", "chunks", "file_hash", "size", "mtime", "ext")
#: Importance of a chunk: below the default of memories (0.5), which are what someone chose to remember.
CHUNK_IMPORTANCE = 0.3


def chunk_memories(ft: FileText, *, root: Path, owner: str | None, scope: str, chunk_chars: int,
                   overlap_lines: int) -> list[NewMemory]:
    """The memories of one file's chunks, in file order."""
    ext = ft.path.suffix.lower()
    pieces = chunk_text(ft.text, chunk_chars=chunk_chars, overlap_lines=overlap_lines,
                        markdown=ext in MARKDOWN_SUFFIXES)
    return [NewMemory(
        type=FILE_CHUNK, content=piece.text, title=f"{ft.rel}:{piece.start_line}-{piece.end_line}",
        metadata={"path": str(ft.path), "root": str(root), "rel": ft.rel, "start_line": piece.start_line,
                  "end_line": piece.end_line, "chunk": i, "chunks": len(pieces), "file_hash": ft.file_hash,
                  "size": ft.size, "mtime": ft.mtime, "ext": ext},
        scope=scope, agent_id=owner, importance=CHUNK_IMPORTANCE, source=str(ft.path),
    ) for i, piece in enumerate(pieces)]


def by_file(rows: list[FileChunkRow]) -> dict[str, list[FileChunkRow]]:
    """Chunk rows grouped by path, in path order (rows arrive ordered by path and position)."""
    out: dict[str, list[FileChunkRow]] = {}
    for row in rows:
        out.setdefault(row.source, []).append(row)
    return out


def meta(row: FileChunkRow, key: str, default: Any = None) -> Any:
    return row.metadata.get(key, default)
