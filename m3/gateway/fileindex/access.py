"""Who may read which path of this machine's disk through the ``files`` tools.

The local OS user (the CLI, MCP on stdio: no token) is trusted and may name any absolute path. A caller bound
to an agent by a bearer token may only name paths that lie, after every symlink is resolved, under one of the
``files.roots`` folders; with none configured it may read no file at all. Paths are always resolved
(``realpath``) before they are compared or stored, so a symlink cannot lead out of a root, and the store
holds one name per file.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from m3.errors import Forbidden, InvalidArgument, NotFound


def resolve(path: str) -> Path:
    """``path`` (absolute, ``~`` allowed) with every symlink resolved; ``invalid_argument`` when relative."""
    given = Path(os.path.expanduser(path))
    if not given.is_absolute():
        # The engine answering the call runs in another folder than the caller: a relative path would
        # silently name something else.
        raise InvalidArgument(f"path {path!r} is relative", hint="Give an absolute path, e.g. \"$PWD/notes\".",
                              details={"path": path})
    return Path(os.path.realpath(given))


def must_exist(path: Path, shown: str) -> None:
    """``not_found`` when nothing is at ``path`` (checked after :func:`check_readable`: a remote caller learns
    nothing about paths outside its roots)."""
    if not path.exists():
        raise NotFound(f"no file or folder at {shown}", hint="Check the path; it must exist on the machine m3 "
                       "runs on.", details={"path": shown})


def under(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def allowed_roots(roots: Sequence[str]) -> list[Path]:
    """The configured roots, resolved (a root that does not exist admits nothing)."""
    return [Path(os.path.realpath(os.path.expanduser(r))) for r in roots if r.strip()]


def check_readable(path: Path, *, bound: bool, roots: Sequence[str], shown: str) -> None:
    """Refuse a token-bound caller a resolved ``path`` outside ``roots`` (``forbidden``); the local user passes."""
    if not bound:
        return
    resolved = allowed_roots(roots)
    if not resolved:
        raise Forbidden("a caller bound to an agent by a token may not read files: files.roots is empty",
                        hint="The local user may list folders remote agents may index in files.roots "
                             "(m3_config.toml [files] roots = [...]).", details={"path": shown})
    if not any(under(path, root) for root in resolved):
        raise Forbidden(f"{shown} is outside the folders remote callers may read (files.roots)",
                        hint="Name a path under one of files.roots; symlinks count where they lead.",
                        details={"path": shown, "resolved": str(path)})
