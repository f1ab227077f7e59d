"""``m3 wiki generate`` from a fixture store: every link resolves, the Obsidian vault is plain Markdown with
``[[links]]``, the HTML file refers to nothing outside itself, and a second run rewrites no file."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import trio

from m3.gateway.dashboard.calls import ServiceCaller
from m3.gateway.service import Service
from m3.gateway.wiki.generate import generate
from tests.gateway.dashboard.seed import seed

MD_LINK = re.compile(r"\]\(([^)]+\.md)\)")
WIKI_LINK = re.compile(r"\[\[([^\]|]+)(?:\|[^\]]*)?\]\]")


def build_all(service: Service, out: Path) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    async def run() -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        ids = await seed(service)
        caller = ServiceCaller(service, "dashboard")
        return ids, {fmt: await generate(caller, fmt, out / fmt) for fmt in ("markdown", "obsidian", "html")}
    return trio.run(run)


def test_the_three_formats_link_every_page_and_a_second_run_rewrites_nothing(service: Service,
                                                                             tmp_path: Path) -> None:
    ids, first = build_all(service, tmp_path)
    markdown = tmp_path / "markdown"
    files = sorted(markdown.rglob("*.md"))
    assert first["markdown"]["written"] == len(files) == first["markdown"]["pages"]
    names = {p.relative_to(markdown).as_posix() for p in files}
    assert {"index.md", "types/decision.md", "types/fact.md", "tags/deploy.md", "conversations/conv-1.md"} <= names
    assert any(n.startswith("entities/") for n in names)
    links = 0
    for page in files:
        for target in MD_LINK.findall(page.read_text()):
            assert (page.parent / target).resolve().is_file(), (page, target)
            links += 1
    assert links > len(files)
    decision = next(p for p in files if p.name.endswith(ids["decision"][:8] + ".md")).read_text()
    assert "## Version history" in decision and decision.count("- version `") == 2 and "order-4411" in decision

    vault = tmp_path / "obsidian"
    stems = {p.stem for p in vault.rglob("*.md")}
    wiki_links = [t for p in vault.rglob("*.md") for t in WIKI_LINK.findall(p.read_text())]
    assert wiki_links and set(wiki_links) <= stems
    assert not any(MD_LINK.search(p.read_text()) for p in vault.rglob("*.md"))
    assert not [p for p in vault.rglob("*") if p.is_file() and p.suffix != ".md"]

    html = (tmp_path / "html" / "wiki.html").read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", html, re.I)
    assert "<script" not in html and "<link" not in html and "@import" not in html
    anchors = set(re.findall(r'id="(p-[^"]+)"', html))
    targets = set(re.findall(r'href="#(p-[^"]+)"', html))
    assert targets and targets <= anchors
    assert "Customer 4411 ordered 3 laptops" in html

    again = trio.run(lambda: _again(service, tmp_path))
    for fmt in ("markdown", "obsidian", "html"):
        assert (again[fmt]["written"], again[fmt]["removed"]) == (0, 0), (fmt, again[fmt])


async def _again(service: Service, out: Path) -> dict[str, dict[str, Any]]:
    caller = ServiceCaller(service, "dashboard")
    return {fmt: await generate(caller, fmt, out / fmt) for fmt in ("markdown", "obsidian", "html")}


@pytest.mark.store_only("sqlite", reason="which files change is the writer's logic, not the store's")
def test_a_changed_memory_rewrites_only_its_own_pages(service: Service, tmp_path: Path) -> None:
    ids, _first = build_all(service, tmp_path)

    async def edit_and_regenerate() -> dict[str, Any]:
        await service.call("memory_update", {"id": ids["order_b"], "importance": 0.9},
                           ServiceCaller(service, "agent-a").ctx)
        return await generate(ServiceCaller(service, "dashboard"), "markdown", tmp_path / "markdown")

    after = trio.run(edit_and_regenerate)
    page = f"memories/order-4412-{ids['order_b'][:8]}"
    assert page + ".md" in after["written_files"] and after["removed"] == 0
    # Only pages that show the edited memory (its own, the listings it is in) are written again.
    assert after["written"] < after["unchanged"]
    for name in after["written_files"]:
        assert name == page + ".md" or page.split("/")[1] in (tmp_path / "markdown" / name).read_text(), name
