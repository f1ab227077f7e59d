"""What indexing a folder (or one file) would change: the files on disk against the chunks in memory.

A file whose size and modification time match what was indexed is unchanged without being read; otherwise it
is read, and unchanged still if its SHA-256 matches. Files indexed before that are no longer found (deleted,
or now ignored) are gone. ``force`` (files_reindex) treats every file found as changed.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from m3.errors import InvalidArgument
from m3.gateway.fileindex.ignore import IgnoreRules
from m3.protocols.messages.files import FileChunkRow

#: Bytes read to tell a binary file from a text one: a NUL among them means binary.
SNIFF_BYTES = 8192


@dataclass(frozen=True)
class Known:
    """A file as it was indexed (from its chunks' metadata)."""

    file_hash: str | None
    size: int | None
    mtime: float | None
    chunks: int


@dataclass(frozen=True)
class FileText:
    """A file read from disk, to be chunked."""

    path: Path
    rel: str
    size: int
    mtime: float
    file_hash: str
    text: str


@dataclass
class Plan:
    root: Path
    changed: list[FileText] = field(default_factory=list)
    new: set[str] = field(default_factory=set)
    unchanged: int = 0
    gone: list[str] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)

    def skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1


def known_files(rows: Iterable[FileChunkRow]) -> dict[str, Known]:
    """Path -> what its chunks say of the file when it was indexed."""
    counts: dict[str, int] = {}
    first: dict[str, FileChunkRow] = {}
    for row in rows:
        counts[row.source] = counts.get(row.source, 0) + 1
        first.setdefault(row.source, row)
    return {path: Known(file_hash=row.metadata.get("file_hash"), size=row.metadata.get("size"),
                        mtime=row.metadata.get("mtime"), chunks=counts[path]) for path, row in first.items()}


def plan(target: Path, known: dict[str, Known], *, patterns: list[str], max_bytes: int, max_files: int,
         force: bool) -> Plan:
    """Compare ``target`` (resolved; a folder or a file) with ``known``; reads the files that may have changed.

    A single file named explicitly must be an indexable text file (``invalid_argument`` otherwise); in a folder,
    files that are not are counted in ``skipped``. A folder with more than ``max_files`` files to index is
    refused before any is read (``invalid_argument``): indexing ``/`` or a home folder by mistake stops early.
    """
    if target.is_dir():
        result = Plan(root=target)
        rules = IgnoreRules(target, patterns, max_bytes=max_bytes)
        found = []
        for entry in _walk(target, rules, result):
            found.append(entry)
            if len(found) > max_files:
                raise InvalidArgument(f"{target} holds more than {max_files} files to index",
                                      hint="Name a narrower folder, add ignore patterns (or a .m3ignore), or raise "
                                           "files.max_files.",
                                      details={"path": str(target), "setting": "files.max_files"})
    else:
        result = Plan(root=target.parent)
        found = [(target, target.name, _explicit_file(target, max_bytes))]
    seen: set[str] = set()
    for path, rel, st in found:
        seen.add(str(path))
        _compare(result, path, rel, st, known.get(str(path)), force=force, explicit=not target.is_dir())
    result.gone = sorted(p for p in known if p not in seen)
    return result


def _explicit_file(path: Path, max_bytes: int) -> os.stat_result:
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        raise InvalidArgument(f"{path} is neither a folder nor a regular file", details={"path": str(path)})
    if st.st_size > max_bytes:
        raise InvalidArgument(f"{path} has {st.st_size} bytes; files over {max_bytes} are not indexed",
                              hint="Raise files.max_file_bytes, or store a line range with memory_write_from_file.",
                              details={"path": str(path), "size": st.st_size, "setting": "files.max_file_bytes"})
    return st


def _walk(root: Path, rules: IgnoreRules, result: Plan) -> Iterable[tuple[Path, str, os.stat_result]]:
    """The regular files under ``root`` that ``rules`` keep, in path order; symlinks are not followed."""
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        here = Path(dirpath)
        base = here.relative_to(root).as_posix()
        prefix = "" if base == "." else base + "/"
        kept = []
        for name in sorted(dirnames):
            if (here / name).is_symlink():
                result.skip("symlink")
            elif not rules.skips_dir(prefix + name, here / name):
                kept.append(name)
        dirnames[:] = kept
        for name in sorted(filenames):
            path = here / name
            try:
                st = os.lstat(path)
            except OSError:
                result.skip("unreadable")
                continue
            if stat.S_ISLNK(st.st_mode):
                result.skip("symlink")  # might lead anywhere, outside the folder too: never followed
                continue
            if not stat.S_ISREG(st.st_mode):
                continue  # sockets, FIFOs, devices: reading one could block or never end
            reason = rules.skips_file(prefix + name, st.st_size)
            if reason:
                result.skip(reason)
                continue
            yield path, prefix + name, st


def _compare(result: Plan, path: Path, rel: str, st: os.stat_result, known: Known | None, *, force: bool,
             explicit: bool) -> None:
    if not force and known is not None and known.size == st.st_size and known.mtime == st.st_mtime:
        result.unchanged += 1
        return
    try:
        data = _read(path)
    except OSError:
        if explicit:
            raise InvalidArgument(f"cannot read {path}", hint="Check the file's permissions.",
                                  details={"path": str(path)}) from None
        result.skip("unreadable")
        return
    text = decode(data)
    if text is None:
        if explicit:
            raise InvalidArgument(f"{path} is a binary file, not text", details={"path": str(path), "reason": "binary"},
                                  hint="files_index reads Markdown, text and code; binary files are left out.")
        result.skip("binary")
        return
    digest = hashlib.sha256(data).hexdigest()
    if not force and known is not None and known.file_hash == digest:
        result.unchanged += 1
        return
    if known is None:
        result.new.add(str(path))
    result.changed.append(FileText(path=path, rel=rel, size=len(data), mtime=st.st_mtime, file_hash=digest,
                                   text=text))


def _read(path: Path) -> bytes:
    # O_NOFOLLOW: a file swapped for a symlink since it was listed is not followed.
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as handle:
        return handle.read()


def decode(data: bytes) -> str | None:
    """The text of a file's bytes (UTF-8, a BOM dropped), or None for a binary file (a NUL, or not UTF-8)."""
    if b"\x00" in data[:SNIFF_BYTES]:
        return None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None
