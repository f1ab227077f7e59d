"""Arguments, results and declarations of the ``files`` domain tools, and of ``memory_write_from_file``.

Indexed files are stored as memories of type ``file_chunk`` (docs/files.md): they share the hybrid search,
the embedding backlog, history and isolation of every memory, and memory_search leaves them out.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from m3.protocols.base import ToolArgs, ToolResult, ToolSpec
from m3.protocols.tools.fields import (
    MAX_STORE_INT,
    CallerAgent,
    Importance,
    JsonObject,
    MemoryType,
    ResultCount,
    Scope,
    Text,
    Timestamp,
)
from m3.protocols.tools.memory import MemoryWriteResult

#: The most patterns one call may give, and the most file changes a reply lists one by one.
MAX_PATTERNS = 200
MAX_LISTED = 1000

FilePath = Annotated[str, Field(min_length=1, max_length=4096, description=(
    "An absolute path on the machine m3 runs on (~ allowed); symlinks are resolved."))]
Patterns = Annotated[list[Annotated[str, Field(max_length=1000)]], Field(max_length=MAX_PATTERNS, description=(
    ".gitignore-style patterns of files and folders to leave out, on top of the defaults, .gitignore and "
    ".m3ignore (e.g. ['*.log', 'drafts/', '!keep.log'])."))]


class FilesIndexArgs(ToolArgs):
    path: FilePath
    ignore: Patterns = Field(default_factory=list)
    scope: Scope = Field("agent", description=(
        "Who may find the chunks: agent (you only, while isolation is on), user or org (everyone)."))
    agent_id: CallerAgent = Field(None, description="Owner of the chunks; defaults to the calling agent.")


class FileChange(ToolResult):
    path: str
    change: Literal["new", "changed", "forgotten"]
    chunks: int = Field(description="Chunks the file has now (0 when forgotten).")


class FilesIndexResult(ToolResult):
    path: str = Field(description="The folder or file indexed, resolved.")
    new: int = Field(description="Files indexed for the first time.")
    changed: int = Field(description="Files whose content changed (or, with files_reindex, every file): re-chunked.")
    unchanged: int = Field(description="Files skipped because their size and time, or their content hash, match.")
    forgotten: int = Field(description="Files indexed before that are gone from disk or now ignored.")
    chunks_written: int
    chunks_retired: int
    skipped: dict[str, int] = Field(description=(
        "Files left out, by reason: ignored, too_large, binary, symlink, unreadable."))
    items: list[FileChange] = Field(description=f"The files that changed, at most {MAX_LISTED}.")
    dry_run: bool = Field(description="True for files_status: nothing was written.")


FILES_INDEX = ToolSpec(
    name="files_index", domain="files", args=FilesIndexArgs, result=FilesIndexResult,
    description=(
        "Put a folder of notes or code (or one file) into memory so that files_search can find passages of it. "
        "Use it when the user points you at a project, a notes folder or a document you will need to consult. "
        "Markdown, text and code are cut into chunks that keep their path and line numbers. Run it again after "
        "files change: unchanged files are skipped, changed ones re-chunked, deleted ones forgotten. Leaves out "
        ".git, node_modules, virtual environments, binaries and large files, plus .gitignore, .m3ignore and the "
        "ignore patterns given."
    ),
)

FILES_REINDEX = ToolSpec(
    name="files_reindex", domain="files", args=FilesIndexArgs, result=FilesIndexResult,
    description=(
        "Re-chunk every file of a folder (or one file) even where nothing changed, e.g. after changing the "
        "chunk size, the scope, or when a search seems to miss a file. Files gone from disk are forgotten. "
        "Use files_index for the usual, incremental update."
    ),
)


class FilesStatusArgs(ToolArgs):
    path: FilePath
    ignore: Patterns = Field(default_factory=list)
    agent_id: CallerAgent = Field(None, description="Whose chunks to compare with; defaults to the calling agent.")


FILES_STATUS = ToolSpec(
    name="files_status", domain="files", args=FilesStatusArgs, result=FilesIndexResult, read_only=True,
    description=(
        "Show what files_index would change for a folder or file, without writing anything: which files are "
        "new, changed or gone since they were indexed, and how many are unchanged or left out. Use it to check "
        "whether memory is up to date with the disk."
    ),
)


class FilesSearchArgs(ToolArgs):
    query: Text = Field(description="What you are looking for, in natural language or keywords.")
    k: ResultCount = None
    path: FilePath | None = Field(None, description="Only chunks of this file or of files under this folder.")
    explain: bool = Field(False, description="Return every ranking signal and its weight per item.")


class FileSearchItem(ToolResult):
    id: str
    path: str
    start_line: int
    end_line: int
    content: str
    score: float = Field(description="Fused relevance in 0..1; the value to grade results by.")
    bm25_score: float
    agent_id: str | None
    explanation: dict[str, Any] | None = Field(None, exclude_if=lambda v: v is None)


class FilesSearchResult(ToolResult):
    count: int
    items: list[FileSearchItem]
    query: str


FILES_SEARCH = ToolSpec(
    name="files_search", domain="files", args=FilesSearchArgs, result=FilesSearchResult, read_only=True,
    description=(
        "Search the indexed files (files_index) for passages relevant to a question, e.g. 'where is the retry "
        "policy configured' or 'notes about the Q3 launch'; optionally only under one folder. The same hybrid "
        "search as memory_search (meaning plus keywords), over file chunks only; each hit names its path and "
        "line span. With isolation on you find your own chunks and those indexed with scope user or org."
    ),
    audit=lambda res: (("memory", item.id) for item in res.items),
)


class FilesGetArgs(ToolArgs):
    path: FilePath


class FileChunkItem(ToolResult):
    id: str
    chunk: int = Field(description="Position in the file, from 0.")
    start_line: int
    end_line: int
    content: str


class FilesGetResult(ToolResult):
    path: str
    file_hash: str | None = Field(description="SHA-256 of the file's bytes when it was indexed.")
    indexed_at: Timestamp
    count: int
    chunks: list[FileChunkItem] = Field(description="In file order; neighbours overlap by a few lines.")


FILES_GET = ToolSpec(
    name="files_get", domain="files", args=FilesGetArgs, result=FilesGetResult, read_only=True,
    description=(
        "Read back one indexed file as memory holds it: its chunks in order with their line spans. Use it after "
        "files_search to see a whole file around a hit; it reads the store, not the disk."
    ),
    audit=lambda res: (("memory", item.id) for item in res.chunks),
)


class FilesListArgs(ToolArgs):
    path: FilePath | None = Field(None, description="Only files under this folder (or this one file).")
    limit: int = Field(1000, ge=1, le=100_000, description="The most files to list.")


class FileEntry(ToolResult):
    path: str
    root: str | None = Field(description="The folder (or file) files_index was given.")
    size: int | None = Field(description="Bytes, when indexed.")
    chunks: int
    file_hash: str | None
    modified_at: Timestamp | None = Field(description="The file's modification time, when indexed.")
    indexed_at: Timestamp
    scope: Scope
    agent_id: str | None


class FilesListResult(ToolResult):
    count: int
    files: list[FileEntry] = Field(description="By path.")
    truncated: bool = Field(description="True when more files match than limit.")


FILES_LIST = ToolSpec(
    name="files_list", domain="files", args=FilesListArgs, result=FilesListResult, read_only=True,
    description=(
        "List the indexed files you can see, with their sizes, chunk counts, modification and indexing times; "
        "optionally only under one folder. Use it to find out what is in memory before searching or re-indexing."
    ),
)


class FilesStatsArgs(ToolArgs):
    path: FilePath | None = Field(None, description="Only files under this folder.")


class FilesStatsResult(ToolResult):
    files: int
    chunks: int
    bytes: int = Field(description="Total size of the indexed files.")
    roots: list[str] = Field(description="The folders (or files) files_index was given.")
    by_extension: dict[str, int] = Field(description="Files per extension ('' for none).")
    last_indexed_at: Timestamp | None


FILES_STATS = ToolSpec(
    name="files_stats", domain="files", args=FilesStatsArgs, result=FilesStatsResult, read_only=True,
    description=(
        "Count the indexed files you can see: files, chunks, bytes, files per extension, the indexed roots and "
        "when something was last indexed. Use it for an overview; files_list names the files."
    ),
)


class FilesForgetArgs(ToolArgs):
    path: FilePath = Field(description="A file or folder indexed before; it need not exist on disk any more.")
    agent_id: CallerAgent = Field(None, description="Whose chunks to forget; defaults to the calling agent.")
    reason: str | None = Field(None, max_length=500, description="Why; kept in each chunk's history.")


class FilesForgetResult(ToolResult):
    path: str
    files: int
    chunks_retired: int


FILES_FORGET = ToolSpec(
    name="files_forget", domain="files", args=FilesForgetArgs, result=FilesForgetResult, destructive=True,
    description=(
        "Forget an indexed file or folder: its chunks are retired so that files_search no longer finds them, and "
        "their history records when and why (as_of still sees them). Use it when a folder should no longer "
        "be consulted; files on disk are not touched. Only your own chunks are forgotten."
    ),
)


class MemoryWriteFromFileArgs(ToolArgs):
    path: FilePath
    start_line: int | None = Field(None, ge=1, le=MAX_STORE_INT, description="First line to keep (from 1).")
    end_line: int | None = Field(None, ge=1, le=MAX_STORE_INT, description="Last line to keep (inclusive).")
    type: MemoryType = Field("reference", description="What kind of memory this is.")
    title: str | None = Field(None, max_length=500, description="Default: the file name and line span.")
    metadata: JsonObject = Field(default_factory=dict, description="Kept with the memory besides path and lines.")
    scope: Scope = Field("agent", description="agent: this agent's own; user: shared for one user; org: everyone.")
    agent_id: CallerAgent = Field(None, description="Owner agent; defaults to the calling agent.")
    importance: Importance = Field(0.5, description="0..1; raises the memory in search.")

    @model_validator(mode="after")
    def _span(self) -> MemoryWriteFromFileArgs:
        if self.start_line is not None and self.end_line is not None and self.end_line < self.start_line:
            raise ValueError("end_line is before start_line")
        return self


class MemoryWriteFromFileResult(MemoryWriteResult):
    path: str
    start_line: int
    end_line: int


MEMORY_WRITE_FROM_FILE = ToolSpec(
    name="memory_write_from_file", domain="memory", args=MemoryWriteFromFileArgs, result=MemoryWriteFromFileResult,
    description=(
        "Store one file's text, or a range of its lines, as a single memory that keeps the path and line span, "
        "e.g. a design decision written in a doc or a function worth remembering. Unlike files_index it makes "
        "one ordinary memory that memory_search finds; the file is read once, later edits do not change it."
    ),
)

FILES_TOOLS: tuple[ToolSpec, ...] = (FILES_INDEX, FILES_REINDEX, FILES_STATUS, FILES_SEARCH, FILES_GET, FILES_LIST,
                                     FILES_STATS, FILES_FORGET, MEMORY_WRITE_FROM_FILE)
