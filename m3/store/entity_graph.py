"""entity_graph's walk: the neighbourhood of one entity over visible relations and co-mentions, bounded in
depth, in nodes and in the edges read per hop."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection

from m3.protocols.messages.memory import MemoryFilter
from m3.store import entities


def neighbourhood(conn: Connection, root: str, *, depth: int, max_nodes: int, co_mentions: bool,
                  flt: MemoryFilter) -> tuple[dict[str, int], list[dict[str, Any]], bool]:
    """Node id -> hops from ``root``, the edges between those nodes, and whether ``max_nodes`` cut it short.

    Breadth first: every entity one hop away is taken before any two hops away; among one hop, relations before
    co-mentions, the most shown first."""
    nodes = {root: 0}
    edges: dict[tuple[str, str, str, str | None], dict[str, Any]] = {}
    frontier, truncated = [root], False
    for hop in range(1, depth + 1):
        found: list[dict[str, Any]] = []
        for r in entities.relations(conn, flt, entity_ids=frontier, limit=entities.EDGES_PER_HOP):
            found.append({"source": r["subject_id"], "target": r["object_id"], "kind": "relation",
                          "predicate": r["predicate"], "memory_id": r["memory_id"], "weight": 1})
        if co_mentions:
            for a, b, memory_id, n in entities.co_mentions(conn, frontier, flt, entities.EDGES_PER_HOP):
                found.append({"source": min(a, b), "target": max(a, b), "kind": "co_mention", "predicate": None,
                              "memory_id": memory_id, "weight": n})
        following: list[str] = []
        for edge in found:
            for end in (edge["source"], edge["target"]):
                if end not in nodes:
                    if len(nodes) >= max_nodes:
                        truncated = True
                        continue
                    nodes[end] = hop
                    following.append(end)
            if edge["source"] in nodes and edge["target"] in nodes:
                key = (edge["kind"], edge["source"], edge["target"], edge["predicate"])
                if key in edges and edge["kind"] == "relation":
                    edges[key]["weight"] += 1
                else:
                    edges.setdefault(key, edge)
        frontier = following
        if not frontier:
            break
    return nodes, list(edges.values()), truncated
