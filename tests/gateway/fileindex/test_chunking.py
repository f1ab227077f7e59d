"""Chunking a file by lines: spans, size, overlap, Markdown headings, very long lines."""

from __future__ import annotations

import itertools

from m3.gateway.fileindex.chunking import chunk_text


def numbered(n: int, width: int = 20) -> str:
    return "".join(f"line {i:04d} ".ljust(width, "x") + "\n" for i in range(1, n + 1))


def test_every_line_is_in_a_chunk_and_spans_are_one_based_and_inclusive() -> None:
    text = numbered(100)
    chunks = chunk_text(text, chunk_chars=300, overlap_lines=2)
    assert chunks[0].start_line == 1 and chunks[-1].end_line == 100
    covered = {n for c in chunks for n in range(c.start_line, c.end_line + 1)}
    assert covered == set(range(1, 101))
    lines = text.splitlines(keepends=True)
    for c in chunks:
        assert c.text == "".join(lines[c.start_line - 1:c.end_line])
        assert len(c.text) <= 300


def test_a_chunk_cut_for_size_repeats_its_last_lines_in_the_next() -> None:
    chunks = chunk_text(numbered(50), chunk_chars=210, overlap_lines=2)
    for before, after in itertools.pairwise(chunks):
        assert after.start_line == before.end_line - 1


def test_markdown_headings_start_a_chunk_without_overlap() -> None:
    text = "# One\nalpha\nbeta\n## Two\ngamma\n# Three\ndelta\n"
    chunks = chunk_text(text, chunk_chars=1000, overlap_lines=2, markdown=True)
    assert [(c.start_line, c.end_line) for c in chunks] == [(1, 3), (4, 5), (6, 7)]
    assert chunks[1].text == "## Two\ngamma\n"
    assert len(chunk_text(text, chunk_chars=1000, overlap_lines=2)) == 1  # not Markdown: one chunk


def test_a_very_long_line_is_cut_into_pieces_of_that_line() -> None:
    text = "short\n" + "y" * 2500 + "\nend\n"
    chunks = chunk_text(text, chunk_chars=1000, overlap_lines=1)
    assert [(c.start_line, c.end_line) for c in chunks] == [(1, 1), (2, 2), (2, 2), (2, 2), (3, 3)]
    assert "".join(c.text for c in chunks[1:4]) == "y" * 2500 + "\n"


def test_empty_and_blank_texts_have_no_chunks() -> None:
    assert chunk_text("", chunk_chars=100, overlap_lines=1) == []
    assert chunk_text("\n  \n\n", chunk_chars=100, overlap_lines=1) == []
