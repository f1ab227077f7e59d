"""Private files: m3's folders (``M3_HOME``, ``engine/``, ``logs/``, ``run/``) are made 0700 and its files (the
SQLite database, its WAL and SHM files, the logs) 0600; existing ones open to others are tightened, with a log line.

A folder keeps the search (x) bits it has: they reveal no name and no content (listing needs r, and every
file inside is 0600), and as root the embedded PostgreSQL's system user must pass through the engine
folder to its own data directory.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

log = logging.getLogger(__name__)

DIR_MODE = 0o700
FILE_MODE = 0o600
#: Bits a folder loses: read and write for group and others (search bits stay, see above).
_DIR_OPEN = 0o066
#: Bits a file, or a folder m3 has just created, loses: everything for group and others.
_ALL_OPEN = 0o077


def private_dir(path: Path) -> list[str]:
    """Create ``path`` (and missing parents) 0700, or tighten it when group or others may read or write it.

    Returns what was tightened, one sentence each, for the caller to log (the log itself may live here).
    """
    missing = [p for p in (path, *path.parents) if not p.exists()]
    path.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    for created in missing:  # mkdir applies the mode to the leaf only; parents get the umask's
        _tighten(created, _ALL_OPEN)
    return [] if path in missing else _tighten(path, _DIR_OPEN)


def private_file(path: Path, *, create: bool = True) -> list[str]:
    """Create ``path`` empty with mode 0600 (unless ``create`` is false), or tighten it to owner-only."""
    try:
        if create:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE))
            return []
    except FileExistsError:
        pass
    return _tighten(path, _ALL_OPEN)


def log_tightened(messages: list[str]) -> None:
    for message in messages:
        log.info("%s", message)


def _tighten(path: Path, open_bits: int) -> list[str]:
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
        if not mode & open_bits:
            return []
        os.chmod(path, mode & ~open_bits)
    except FileNotFoundError:
        return []
    except PermissionError as exc:  # not ours (e.g. a shared folder): say so, never fail the command
        return [f"cannot make {path} private: {exc.strerror}"]
    return [f"{path} was open to other users (mode {mode:o}); tightened to {mode & ~open_bits:o}"]
