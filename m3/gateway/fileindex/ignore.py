"""Which files a folder's index leaves out: built-in rules, then .gitignore-style patterns.

The patterns follow .gitignore: ``#`` starts a comment, ``!`` re-includes, a trailing ``/`` matches folders
only, a pattern with a ``/`` elsewhere is anchored at the indexed folder (a leading ``/`` just anchors), one
without matches a name at any depth; ``*`` and ``?`` stay within one path segment, ``**`` crosses segments.
The last matching pattern wins. A folder left out is not entered, so nothing under it can be re-included
(as in git).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

#: Folders never indexed: version control, dependencies, virtual environments, caches, build output.
DEFAULT_DIRS = frozenset({
    ".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", "venv", ".tox", ".nox", ".mypy_cache",
    ".pytest_cache", ".ruff_cache", ".cache", ".idea", ".eggs",
})
#: Files never indexed, by suffix: compiled code, archives, media, databases (the binary check catches more).
DEFAULT_SUFFIXES = frozenset({
    ".pyc", ".pyo", ".so", ".dylib", ".dll", ".exe", ".o", ".a", ".class", ".jar", ".whl", ".zip", ".gz",
    ".tgz", ".bz2", ".xz", ".7z", ".tar", ".png", ".jpg", ".jpeg", ".gif", ".webp", ".ico", ".pdf", ".mp3",
    ".mp4", ".mov", ".woff", ".woff2", ".ttf", ".db", ".sqlite", ".sqlite3", ".bin", ".npy", ".pt",
})
#: The files in the indexed folder whose patterns apply (besides the tool's ``ignore`` argument).
IGNORE_FILES = (".gitignore", ".m3ignore")


@dataclass(frozen=True)
class Pattern:
    regex: re.Pattern[str]
    negated: bool
    dir_only: bool
    text: str


def parse(lines: Iterable[str]) -> list[Pattern]:
    """The patterns of .gitignore-style ``lines`` (comments and blank lines dropped)."""
    out: list[Pattern] = []
    for raw in lines:
        line = raw.rstrip("\n").rstrip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        body = line[1:] if negated else line
        if body.startswith("\\"):  # "\#name" and "\!name" name files starting with # or !
            body = body[1:]
        dir_only = body.endswith("/")
        body = body.rstrip("/")
        if not body:
            continue
        anchored = "/" in body
        body = body.lstrip("/")
        prefix = "^" if anchored else "^(?:.*/)?"
        out.append(Pattern(re.compile(prefix + _translate(body) + "$"), negated, dir_only, line))
    return out


def _translate(glob: str) -> str:
    out, i = [], 0
    while i < len(glob):
        if glob.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif glob.startswith("**", i):
            out.append(".*")
            i += 2
        elif glob[i] == "*":
            out.append("[^/]*")
            i += 1
        elif glob[i] == "?":
            out.append("[^/]")
            i += 1
        elif glob[i] == "[" and "]" in glob[i + 1:]:
            end = glob.index("]", i + 1)
            inner = glob[i + 1:end]
            out.append("[" + ("^" + inner[1:] if inner.startswith("!") else inner).replace("\\", "\\\\") + "]")
            i = end + 1
        else:
            out.append(re.escape(glob[i]))
            i += 1
    return "".join(out)


class IgnoreRules:
    """The rules for one indexed folder: :data:`DEFAULT_DIRS`, :data:`DEFAULT_SUFFIXES`, a size limit, then
    the patterns of :data:`IGNORE_FILES` in the folder and of the ``patterns`` given, in that order."""

    def __init__(self, root: Path, patterns: Iterable[str] = (), *, max_bytes: int):
        self.root = root
        self.max_bytes = max_bytes
        lines: list[str] = []
        for name in IGNORE_FILES:
            source = root / name
            if source.is_file():
                lines += source.read_text(encoding="utf-8", errors="replace").splitlines()
        self.patterns = parse([*lines, *patterns])

    def skips_dir(self, rel: str, path: Path) -> bool:
        """Whether the folder at ``rel`` (posix, relative to the root) is left out, and not entered."""
        name = rel.rsplit("/", 1)[-1]
        if name in DEFAULT_DIRS or (path / "pyvenv.cfg").is_file():  # any virtual environment, whatever its name
            return True
        return self._matched(rel, is_dir=True)

    def skips_file(self, rel: str, size: int) -> str | None:
        """Why the file at ``rel`` is left out (``"ignored"``, ``"too_large"``), or None when it is indexed."""
        if Path(rel).suffix.lower() in DEFAULT_SUFFIXES or self._matched(rel, is_dir=False):
            return "ignored"
        if size > self.max_bytes:
            return "too_large"
        return None

    def _matched(self, rel: str, *, is_dir: bool) -> bool:
        ignored = False
        for pattern in self.patterns:
            if pattern.dir_only and not is_dir:
                continue
            if pattern.regex.match(rel):
                ignored = not pattern.negated
        return ignored
