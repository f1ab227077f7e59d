"""Writing one benchmark's section of ``docs/benchmarks.md`` in place.

A section is the text between ``<!-- begin:NAME -->`` and ``<!-- end:NAME -->``;
a benchmark run with ``--doc`` replaces only its own section (appending it,
markers included, the first time), so every benchmark's latest figures sit
on one page beside the command that produced them.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS_DOC = ROOT / "docs" / "benchmarks.md"


def demote(markdown: str, levels: int = 1) -> str:
    """Headings one level deeper (``# X`` → ``## X``), so a page fits under the benchmarks page's title."""
    return re.sub(r"^(#+) ", lambda m: "#" * (len(m.group(1)) + levels) + " ", markdown, flags=re.M)


def write_section(name: str, body: str, doc: Path = BENCHMARKS_DOC) -> None:
    begin, end = f"<!-- begin:{name} -->", f"<!-- end:{name} -->"
    block = f"{begin}\n{body.strip()}\n{end}"
    text = doc.read_text(encoding="utf-8") if doc.exists() else ""
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
    if pattern.search(text):
        text = pattern.sub(lambda _m: block, text, count=1)
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    doc.write_text(text, encoding="utf-8")
