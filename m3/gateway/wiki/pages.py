"""The wiki's pages as Markdown, with links in either form: relative Markdown links or Obsidian's ``[[links]]``.

The page unit (docs/dashboard.md, "The wiki"): one page per current memory (its text, facts, versions and history,
links to the memories it is linked with and to the entities that name it); one per entity and one per conversation
when there are any; index pages by type, by tag (``metadata.tags``) and by month recorded; and ``index`` linking
them all. Page names are stable (a slug of the title and the id's first 8 characters), so links survive edits.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from m3.gateway.wiki.collect import Wiki, slug, tags_of

#: A link from the page at ``source`` (a relative path without extension) to ``target``, shown as ``text``.
LinkStyle = Callable[[str, str, str], str]


def markdown_link(source: str, target: str, text: str) -> str:
    up = "../" * source.count("/")
    return f"[{_label(text)}]({up}{target}.md)"


def obsidian_link(_source: str, target: str, text: str) -> str:
    return f"[[{target.rsplit('/', 1)[-1]}|{_label(text)}]]"


def _label(text: str) -> str:
    return " ".join(text.replace("[", "(").replace("]", ")").replace("|", "/").split())[:80] or "untitled"


def memory_path(m: dict[str, Any]) -> str:
    return f"memories/{slug(m.get('title') or m['content'])}-{m['id'][:8]}"


def entity_path(entity: dict[str, Any]) -> str:
    return f"entities/{slug(entity['name'])}-{slug(entity['id'], 12)}"


def title_of(m: dict[str, Any]) -> str:
    return m.get("title") or " ".join(str(m["content"]).split())[:60]


#: Where a memory's own text starts and ends when ``fence`` is set (the HTML file shows it verbatim, not as Markdown).
FENCE = "~~~m3-content"


def build(wiki: Wiki, link: LinkStyle, *, fence: bool = False) -> dict[str, str]:
    """Every page: relative path (no extension) → Markdown text."""
    by_id = {m["id"]: m for m in wiki.memories}
    pages: dict[str, str] = {}
    naming: dict[str, list[str]] = {}
    for entity_id, entity in wiki.entities.items():
        for memory_id in entity["memory_ids"]:
            naming.setdefault(memory_id, []).append(entity_id)
    for m in wiki.memories:
        path = memory_path(m)
        text = [FENCE, str(m["content"]), FENCE] if fence else [str(m["content"])]
        lines = [f"# {title_of(m)}", "", *text, "", "| field | value |", "|---|---|"]
        for key in ("id", "type", "scope", "agent_id", "user_id", "importance", "pinned", "valid_from", "recorded_at"):
            lines.append(f"| {key} | {'—' if m.get(key) is None else m.get(key)} |")
        tags = tags_of(m)
        if tags:
            lines.append("| tags | " + ", ".join(link(path, f"tags/{slug(t)}", t) for t in tags) + " |")
        if m.get("conversation_id"):
            target = "conversations/" + slug(m["conversation_id"])
            lines.append(f"| conversation | {link(path, target, m['conversation_id'])} |")
        linked = wiki.links.get(m["id"], [])
        if linked:
            lines += ["", "## Links", ""]
            lines += [f"- {'→' if out else '←'} {kind}: {link(path, memory_path(by_id[other]), title_of(by_id[other]))}"
                      for other, kind, out in linked]
        if m["id"] in naming:
            lines += ["", "## Entities", ""]
            named = [wiki.entities[x] for x in naming[m["id"]]]
            lines += [f"- {link(path, entity_path(x), x['name'])}" for x in named]
        history = wiki.history.get(m["id"], {})
        lines += ["", "## Version history", ""]
        lines += [f"- version `{v}`" + (" (this one)" if v == m["id"] else "") for v in history.get("versions", [])]
        lines += [""] + [f"- {ev['at']} **{ev['event']}** by {ev['actor']}" for ev in history.get("events", [])]
        pages[path] = "\n".join(lines) + "\n"
    for entity in wiki.entities.values():
        path = entity_path(entity)
        lines = [f"# {entity['name']}", "", f"An entity of type {entity['type']}.", "", "## Named in", ""]
        lines += [f"- {link(path, memory_path(by_id[i]), title_of(by_id[i]))}" for i in entity["memory_ids"]]
        pages[path] = "\n".join(lines) + "\n"
    for conversation, members in sorted(wiki.conversations().items()):
        path = "conversations/" + slug(conversation)
        pages[path] = _listing(f"Conversation {conversation}", path, members, link)
    pages.update(_indexes(wiki, link))
    return pages


def _listing(title: str, path: str, members: list[dict[str, Any]], link: LinkStyle) -> str:
    rows = [f"- {link(path, memory_path(m), title_of(m))} ({m['type']}, {str(m['recorded_at'])[:10]})"
            for m in sorted(members, key=lambda m: (str(m["recorded_at"]), m["id"]))]
    return f"# {title}\n\n" + "\n".join(rows) + "\n"


def _indexes(wiki: Wiki, link: LinkStyle) -> dict[str, str]:
    groups: dict[str, dict[str, list[dict[str, Any]]]] = {"types": {}, "tags": {}, "time": {}}
    for m in wiki.memories:
        groups["types"].setdefault(m["type"], []).append(m)
        groups["time"].setdefault(str(m["recorded_at"])[:7], []).append(m)
        for tag in tags_of(m):
            groups["tags"].setdefault(tag, []).append(m)
    pages: dict[str, str] = {}
    home = ["# Memory wiki", "", f"{len(wiki.memories)} current memories."]
    for folder, heading in (("types", "By type"), ("tags", "By tag"), ("time", "By month recorded")):
        if not groups[folder]:
            continue
        home += ["", f"## {heading}", ""]
        for key in sorted(groups[folder]):
            path = f"{folder}/{slug(key)}"
            pages[path] = _listing(f"{heading}: {key}", path, groups[folder][key], link)
            home.append(f"- {link('index', path, key)} ({len(groups[folder][key])})")
    if wiki.entities:
        home += ["", "## Entities", ""]
        home += [f"- {link('index', entity_path(x), x['name'])}" for x in
                 sorted(wiki.entities.values(), key=lambda x: (x["name"], x["id"]))]
    conversations = wiki.conversations()
    if conversations:
        home += ["", "## Conversations", ""]
        home += [f"- {link('index', 'conversations/' + slug(c), c)}" for c in sorted(conversations)]
    pages["index"] = "\n".join(home) + "\n"
    return pages
