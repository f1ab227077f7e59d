"""Messages of the ``files`` domain: the Writer's batch of file chunks and the Searcher's listing of them.

File chunks are memories of type :data:`FILE_CHUNK` whose ``source`` is the file's resolved absolute path and
whose metadata says where in the file they come from (docs/files.md).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from m3.protocols.base import Message, Request
from m3.protocols.messages.memory import FILE_CHUNK, Filtered, NewMemory

__all__ = ["FILE_CHUNK", "FileChunkRow", "FilesApplied", "IndexFiles", "ListFileChunks"]


class FilesApplied(Message):
    """What one :class:`IndexFiles` changed (its reply)."""

    written: int
    retired: int


class IndexFiles(Request[FilesApplied]):
    """In one transaction: retire the current chunks of ``retire_paths`` owned by ``agent_id``, then insert
    ``chunks`` (file chunks are never merged with an identical memory: two files may share a passage).
    ``reason`` goes into the history event of each retired chunk."""

    chunks: tuple[NewMemory, ...] = ()
    retire_paths: tuple[str, ...] = ()
    agent_id: str | None = None
    actor: str | None = None
    reason: str = "reindexed"


class FileChunkRow(Message):
    """One current file chunk as the Searcher lists it (``content`` only when asked for)."""

    id: str
    source: str
    title: str | None
    content: str | None
    metadata: dict[str, Any]
    scope: str
    agent_id: str | None
    recorded_at: datetime


class ListFileChunks(Filtered, Request[list[FileChunkRow]]):
    """The current file chunks ``filter`` sees whose path is ``prefix`` or lies under it (all when None),
    owned by ``owner`` when given, ordered by path then position in the file."""

    prefix: str | None = None
    owner: str | None = None
    with_content: bool = False
