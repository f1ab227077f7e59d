"""What a wiki is made of, read through the tools as one agent (so isolation applies as to any agent): the current
memories with their versions, history and links, the entities that name them, and their conversations."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from m3.gateway.dashboard.calls import Caller

PAGE = 200


@dataclass
class Wiki:
    memories: list[dict[str, Any]] = field(default_factory=list)
    #: memory id → its history (``versions``, ``events``).
    history: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: memory id → the memories it links to or from: ``(other id, link type, outgoing)``.
    links: dict[str, list[tuple[str, str, bool]]] = field(default_factory=dict)
    #: entity id → its record with ``memory_ids`` (the current memories naming it).
    entities: dict[str, dict[str, Any]] = field(default_factory=dict)

    def conversations(self) -> dict[str, list[dict[str, Any]]]:
        found: dict[str, list[dict[str, Any]]] = {}
        for m in self.memories:
            if m.get("conversation_id"):
                found.setdefault(m["conversation_id"], []).append(m)
        return found


def tags_of(memory: dict[str, Any]) -> list[str]:
    """The memory's tags: ``metadata.tags`` (a list or a comma-separated string)."""
    raw = (memory.get("metadata") or {}).get("tags") or []
    values = raw.split(",") if isinstance(raw, str) else raw if isinstance(raw, list) else []
    return sorted({str(t).strip() for t in values if str(t).strip()})


def slug(text: str, limit: int = 40) -> str:
    words = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return words[:limit].strip("-") or "untitled"


async def collect(call: Caller) -> Wiki:
    wiki = Wiki()
    before: int | None = None
    while True:
        page = await call("memory_list", {"limit": PAGE, **({"before": before} if before else {})})
        wiki.memories += page["items"]
        before = page.get("next_before")
        if not before or not page["items"]:
            break
    current = {m["id"] for m in wiki.memories}
    for m in wiki.memories:
        wiki.history[m["id"]] = await call("memory_history", {"id": m["id"]})
        graph = await call("memory_graph", {"id": m["id"], "depth": 1})
        wiki.links[m["id"]] = sorted(
            {(x["to_id"] if x["from_id"] == m["id"] else x["from_id"], x["type"], x["from_id"] == m["id"])
             for x in graph["edges"] if m["id"] in (x["from_id"], x["to_id"])
             and (x["to_id"] if x["from_id"] == m["id"] else x["from_id"]) in current})
    offset = 0
    while True:
        listed = await call("entity_list", {"limit": PAGE, "offset": offset})
        for summary in listed["items"]:
            record = await call("entity_get", {"id": summary["id"], "mention_limit": 100})
            named = sorted({x["memory_id"] for x in record.get("mention_list", [])} & current)
            if named:
                wiki.entities[summary["id"]] = {**summary, "memory_ids": named}
        if len(listed["items"]) < PAGE:
            break
        offset += PAGE
    return wiki
