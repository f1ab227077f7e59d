"""The wiki as ONE self-contained HTML file that works offline: every page a ``<section>``, shown when the address
names it (CSS ``:target``; no script), the index shown otherwise; links are ``#`` anchors, so nothing is fetched."""

from __future__ import annotations

import re
from html import escape

from m3.gateway.wiki.pages import FENCE

STYLE = """body{font:15px/1.5 system-ui,sans-serif;margin:0 auto;max-width:900px;padding:1em;color:#1d2330}
section{display:none}section:target{display:block}#p-index{display:block}
section:target~#p-index{display:none}
table{border-collapse:collapse}td,th{border:1px solid #ccd;padding:.2em .5em}pre{background:#f4f5f8;padding:.6em;
white-space:pre-wrap}nav a{margin-right:1em}"""

_LINK = re.compile(r"\[([^\]]*)\]\(#(p-[A-Za-z0-9_-]+)\)")
_BOLD = re.compile(r"\*\*([^*]+)\*\*")
_CODE = re.compile(r"`([^`]+)`")


def anchor(path: str) -> str:
    return "p-" + re.sub(r"[^A-Za-z0-9_-]", "_", path)


def html_link(_source: str, target: str, text: str) -> str:
    return f"[{' '.join(text.replace('[', '(').replace(']', ')').split())[:80]}](#{anchor(target)})"


def _inline(text: str) -> str:
    """Escaped text with the page's own links, bold and code spans (links only to ``#p-`` anchors)."""
    safe = escape(text, quote=True)
    safe = _LINK.sub(lambda m: f'<a href="#{m.group(2)}">{m.group(1)}</a>', safe)
    safe = _BOLD.sub(r"<b>\1</b>", safe)
    return _CODE.sub(r"<code>\1</code>", safe)


def to_html(markdown: str) -> str:
    """The subset of Markdown the wiki's pages use: headings, lists, tables, the fenced memory text, paragraphs."""
    out: list[str] = []
    lines = markdown.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if line == FENCE:
            end = lines.index(FENCE, i + 1) if FENCE in lines[i + 1:] else len(lines)
            out.append("<pre>" + escape("\n".join(lines[i + 1:end])) + "</pre>")
            i = end + 1
            continue
        if line.startswith("## "):
            out.append(f"<h2>{_inline(line[3:])}</h2>")
        elif line.startswith("# "):
            out.append(f"<h1>{_inline(line[2:])}</h1>")
        elif line.startswith("- "):
            items = []
            while i < len(lines) and lines[i].startswith("- "):
                items.append(f"<li>{_inline(lines[i][2:])}</li>")
                i += 1
            out.append("<ul>" + "".join(items) + "</ul>")
            continue
        elif line.startswith("|"):
            rows = []
            while i < len(lines) and lines[i].startswith("|"):
                cells = [c.strip() for c in lines[i].strip("|").split(" | ")]
                if not all(set(c) <= {"-", "|"} for c in cells):
                    rows.append("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in cells) + "</tr>")
                i += 1
            out.append("<table>" + "".join(rows) + "</table>")
            continue
        elif line.strip():
            out.append(f"<p>{_inline(line)}</p>")
        i += 1
    return "\n".join(out)


def single_file(pages: dict[str, str]) -> str:
    """The whole wiki as one document; the index section comes last so that ``:target`` sections hide it."""
    order = [*sorted(p for p in pages if p != "index"), "index"]
    sections = "\n".join(f'<section id="{anchor(p)}">{to_html(pages[p])}</section>' for p in order)
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>m3 memory wiki</title>'
            f'<style>{STYLE}</style></head><body><nav><a href="#{anchor("index")}">Index</a></nav>'
            f"{sections}</body></html>\n")
