"""``m3 wiki generate --format markdown|html|obsidian --out DIR``: collect through the tools, render, and write only
the files whose content changed; files of pages that no longer exist are removed from the folders the wiki owns."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import trio

from m3.config import Config
from m3.errors import InvalidArgument
from m3.gateway.dashboard.calls import Caller, CallFailed, EngineCaller, ServiceCaller
from m3.gateway.wiki.collect import collect
from m3.gateway.wiki.html_file import html_link, single_file
from m3.gateway.wiki.pages import build, markdown_link, obsidian_link

FORMATS = ("markdown", "html", "obsidian")
#: The folders a Markdown or Obsidian wiki writes; stale pages in them are removed, nothing else is touched.
OWNED = ("memories", "entities", "conversations", "types", "tags", "time")
HTML_NAME = "wiki.html"


def render(pages_of: dict[str, str], fmt: str) -> dict[str, str]:
    """File name (relative) → content."""
    if fmt == "html":
        return {HTML_NAME: single_file(pages_of)}
    return {f"{path}.md": text for path, text in pages_of.items()}


async def generate(call: Caller, fmt: str, out: Path) -> dict[str, Any]:
    """Write the wiki of what ``call``'s agent may read; ``{format, out, pages, written, unchanged, removed}``."""
    if fmt not in FORMATS:
        raise InvalidArgument(f"unknown wiki format {fmt!r}", details={"allowed": list(FORMATS)})
    wiki = await collect(call)
    link = {"markdown": markdown_link, "obsidian": obsidian_link, "html": html_link}[fmt]
    pages = build(wiki, link, fence=fmt == "html")
    files = render(pages, fmt)
    return {"format": fmt, "out": str(out), "pages": len(pages), **write_changed(out, files, fmt)}


def write_changed(out: Path, files: dict[str, str], fmt: str) -> dict[str, Any]:
    """Write each file whose bytes differ (named in ``written_files``); remove the wiki's own files that are no
    longer generated."""
    out.mkdir(parents=True, exist_ok=True)
    written: list[str] = []
    unchanged = removed = 0
    for name, text in files.items():
        path = out / name
        data = text.encode("utf-8")
        if path.is_file() and path.read_bytes() == data:
            unchanged += 1
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        written.append(name)
    if fmt != "html":
        for folder in OWNED:
            for stale in sorted((out / folder).glob("*.md")) if (out / folder).is_dir() else []:
                if str(stale.relative_to(out)) not in files:
                    stale.unlink()
                    removed += 1
    return {"written": len(written), "unchanged": unchanged, "removed": removed, "written_files": sorted(written)}


def generate_command(config: Config, ns: argparse.Namespace) -> dict[str, Any]:
    """The CLI command: the wiki of what the dashboard's agent (or ``--agent``) may read."""
    from m3.gateway.engine.paths import engine_mode

    agent = ns.agent or config["dashboard.agent"]
    user = config["identity.user_id"] or None
    out = Path(ns.out).expanduser()

    def run(caller: Caller) -> dict[str, Any]:
        try:
            result: dict[str, Any] = trio.run(generate, caller, ns.format, out)
        except CallFailed as failed:
            raise failed.as_error() from None
        return result

    if engine_mode(config) == "engine":
        return run(EngineCaller(config, agent, user))
    from m3.gateway.runtime import running

    with running(config) as service:
        return run(ServiceCaller(service, agent, user))
