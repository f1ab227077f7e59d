"""Line-based chunking of a text file into pieces of about ``chunk_chars`` characters.

Contract: every line of the file lies in at least one chunk; a chunk's ``start_line``/``end_line`` are 1-based
and inclusive; chunks come in file order. A chunk ends before a Markdown heading (in Markdown files) once it
holds something, or when adding the next line would pass ``chunk_chars``; a chunk ended for size repeats its
last ``overlap_lines`` lines at the start of the next, so a passage cut in two is still found whole once. A
single line longer than ``chunk_chars`` (minified code) is cut into pieces of that many characters, each
reporting that one line as its span.
"""

from __future__ import annotations

from dataclasses import dataclass

MARKDOWN_SUFFIXES = frozenset({".md", ".markdown", ".mdx", ".rst"})


@dataclass(frozen=True)
class Chunk:
    text: str
    start_line: int
    end_line: int


def chunk_text(text: str, *, chunk_chars: int, overlap_lines: int, markdown: bool = False) -> list[Chunk]:
    """The chunks of ``text`` (see the module docstring); none for an empty text."""
    lines = text.splitlines(keepends=True)
    chunks: list[Chunk] = []
    current: list[tuple[int, str]] = []  # (line number, line) of the chunk being built
    size = 0
    for number, line in enumerate(lines, 1):
        if len(line) > chunk_chars:
            _close(chunks, current)
            current, size = [], 0
            chunks.extend(Chunk(line[i:i + chunk_chars], number, number) for i in range(0, len(line), chunk_chars))
            continue
        heading = markdown and line.startswith("#") and bool(current)
        if heading or (current and size + len(line) > chunk_chars):
            _close(chunks, current)
            # Overlap only where the cut was forced by size: a heading starts a section of its own.
            kept = [] if heading else current[-overlap_lines:] if overlap_lines > 0 else []
            if sum(len(t) for _, t in kept) + len(line) > chunk_chars:
                kept = []
            current = list(kept)
            size = sum(len(t) for _, t in current)
        current.append((number, line))
        size += len(line)
    _close(chunks, current)
    return chunks


def _close(chunks: list[Chunk], current: list[tuple[int, str]]) -> None:
    if current and any(t.strip() for _, t in current):
        chunks.append(Chunk("".join(t for _, t in current), current[0][0], current[-1][0]))
