"""Ignore rules: the defaults, .gitignore-style patterns (anchoring, folders only, negation, **), .m3ignore."""

from __future__ import annotations

from pathlib import Path

from m3.gateway.fileindex.ignore import IgnoreRules, parse


def ignored(patterns: list[str], rel: str, *, is_dir: bool = False) -> bool:
    result = False
    for p in parse(patterns):
        if (not p.dir_only or is_dir) and p.regex.match(rel):
            result = not p.negated
    return result


def test_a_name_pattern_matches_at_any_depth_and_a_slash_anchors_it() -> None:
    assert ignored(["*.log"], "a.log") and ignored(["*.log"], "deep/down/a.log")
    assert not ignored(["*.log"], "a.log.txt")
    assert ignored(["docs/*.md"], "docs/a.md") and not ignored(["docs/*.md"], "x/docs/a.md")
    assert not ignored(["docs/*.md"], "docs/sub/a.md")
    assert ignored(["/top.txt"], "top.txt") and not ignored(["/top.txt"], "sub/top.txt")


def test_double_star_crosses_folders_and_a_trailing_slash_means_folders_only() -> None:
    assert ignored(["docs/**/*.md"], "docs/a.md") and ignored(["docs/**/*.md"], "docs/x/y/a.md")
    assert ignored(["**/secret"], "a/b/secret")
    assert ignored(["drafts/"], "notes/drafts", is_dir=True)
    assert not ignored(["drafts/"], "notes/drafts")


def test_the_last_matching_pattern_wins_and_comments_are_skipped() -> None:
    patterns = ["# a comment", "", "*.log", "!keep.log"]
    assert ignored(patterns, "x.log") and not ignored(patterns, "keep.log")
    assert not ignored(["# *.log"], "x.log")
    assert ignored(["file[0-9].txt"], "file3.txt") and not ignored(["file[!0-9].txt"], "file3.txt")


def test_rules_leave_out_default_folders_venvs_binaries_by_suffix_and_large_files(tmp_path: Path) -> None:
    (tmp_path / "env1").mkdir()
    (tmp_path / "env1" / "pyvenv.cfg").write_text("home = /usr\n")
    (tmp_path / "src").mkdir()
    (tmp_path / ".m3ignore").write_text("private/\n*.tmp\n")
    rules = IgnoreRules(tmp_path, ["*.bak"], max_bytes=100)
    assert rules.skips_dir(".git", tmp_path / ".git") and rules.skips_dir("a/node_modules", tmp_path / "x")
    assert rules.skips_dir("env1", tmp_path / "env1")  # any folder holding pyvenv.cfg
    assert not rules.skips_dir("src", tmp_path / "src")
    assert rules.skips_dir("private", tmp_path / "private")  # .m3ignore
    assert rules.skips_file("a.tmp", 1) == "ignored" and rules.skips_file("a.bak", 1) == "ignored"
    assert rules.skips_file("logo.PNG", 1) == "ignored"
    assert rules.skips_file("notes.md", 101) == "too_large"
    assert rules.skips_file("notes.md", 100) is None
