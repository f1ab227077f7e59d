"""Server-rendered HTML without a template engine: every value is escaped where it enters the page.

Functions here take *already safe* HTML for their structural arguments and escape data with :func:`e`.
There is no JavaScript anywhere: forms and links only (the Content-Security-Policy forbids scripts).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from html import escape
from typing import Any
from urllib.parse import urlencode

#: The pages of the navigation bar: path, label.
NAV = (("/", "Memories"), ("/search", "Search"), ("/agents", "Agents"), ("/tasks", "Tasks"),
       ("/graph", "Graph"), ("/conflicts", "Conflicts"), ("/audit", "Audit & GDPR"), ("/health", "Health"))

STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#1d2330;padding:.5em 1em}header a{color:#cfd6e4;margin-right:1.1em;text-decoration:none}
header a.on{color:#fff;font-weight:600}header b{color:#fff;margin-right:1.5em}
main{padding:1em 1.5em;max-width:1200px}h1{font-size:1.35em}h2{font-size:1.1em;margin-top:1.4em}
table{border-collapse:collapse;width:100%;background:#fff}td,th{border:1px solid #dde1e8;padding:.3em .5em;
vertical-align:top;text-align:left}th{background:#eef1f5}form.inline{display:inline}
.box{background:#fff;border:1px solid #dde1e8;padding:.8em;margin:.6em 0}.err{border-color:#d33;background:#fff3f3}
.ok{border-color:#3a3;background:#f3fff3}pre{white-space:pre-wrap;margin:0}.muted{color:#6b7385}
.filters input,.filters select{margin-right:.6em}svg{background:#fff;border:1px solid #dde1e8}
.tag{display:inline-block;background:#e6ebf3;border-radius:3px;padding:0 .4em;margin-right:.3em}
"""


def e(value: Any) -> str:
    """``value`` as escaped text ('' for None)."""
    return "" if value is None else escape(str(value), quote=True)


def href(path: str, **params: Any) -> str:
    """A URL with the non-empty query parameters, escaped for an attribute."""
    kept = {k: v for k, v in params.items() if v not in (None, "", False)}
    return e(path + ("?" + urlencode(kept) if kept else ""))


def link(path: str, text: Any, **params: Any) -> str:
    return f'<a href="{href(path, **params)}">{e(text)}</a>'


def short(memory_id: Any) -> str:
    return str(memory_id)[:8]


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], empty: str = "nothing here") -> str:
    """A table of already-safe cells."""
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    if not body:
        return f'<p class="muted">{e(empty)}</p>'
    head = "".join(f"<th>{e(h)}</th>" for h in headers)
    return f"<table><tr>{head}</tr>{body}</table>"


def hidden(name: str, value: Any) -> str:
    return f'<input type="hidden" name="{e(name)}" value="{e(value)}">'


def action(path: str, csrf: str, label: str, fields: str = "", *, inline: bool = True) -> str:
    """A POST form with the CSRF token: one button, and optional already-safe fields before it."""
    cls = ' class="inline"' if inline else ""
    return (f'<form method="post" action="{e(path)}"{cls}>{hidden("csrf", csrf)}{fields}'
            f'<button type="submit">{e(label)}</button></form>')


def select(name: str, options: Sequence[str], chosen: Any, blank: str = "any") -> str:
    opts = f'<option value="">{e(blank)}</option>' if blank else ""
    opts += "".join(f'<option value="{e(o)}"{" selected" if o == chosen else ""}>{e(o)}</option>' for o in options)
    return f'<select name="{e(name)}">{opts}</select>'


def text_input(name: str, value: Any, placeholder: str = "", kind: str = "text") -> str:
    return f'<input type="{kind}" name="{e(name)}" value="{e(value)}" placeholder="{e(placeholder)}">'


def pretty(value: Any) -> str:
    """A JSON value as an escaped preformatted block."""
    return f"<pre>{e(json.dumps(value, indent=1, ensure_ascii=False, default=str))}</pre>"


def notice(message: str | None, error: dict[str, Any] | None = None) -> str:
    if error is not None:
        hint = f'<br><span class="muted">{e(error.get("hint"))}</span>' if error.get("hint") else ""
        return f'<div class="box err"><b>{e(error.get("code"))}</b>: {e(error.get("message"))}{hint}</div>'
    return f'<div class="box ok">{e(message)}</div>' if message else ""


def page(title: str, path: str, body: str, *, agent: str) -> str:
    """The whole document: navigation, the title, ``body`` (already safe)."""
    nav = "".join(f'<a href="{p}"{" class=on" if p == path else ""}>{e(label)}</a>' for p, label in NAV)
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{e(title)} · m3</title>'
            f'<meta name="viewport" content="width=device-width"><link rel="stylesheet" href="/style.css"></head><body>'
            f'<header><b>m3</b>{nav}<span class="muted">as agent {e(agent)}</span></header>'
            f"<main><h1>{e(title)}</h1>{body}</main></body></html>")
