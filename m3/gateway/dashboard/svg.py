"""Graphs as inline SVG drawn on the server: nodes on a circle (the start node in the middle), straight edges with
their type, each node a link to its page. No script: the picture is interactive through its links only."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from m3.gateway.dashboard.html import e

WIDTH, HEIGHT, RADIUS = 760, 520, 200


@dataclass(frozen=True)
class Node:
    id: str
    label: str
    href: str
    kind: str = ""


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    label: str


def positions(nodes: Sequence[Node], centre: str | None) -> dict[str, tuple[float, float]]:
    """The centre node in the middle, the others evenly on a circle around it."""
    cx, cy = WIDTH / 2, HEIGHT / 2
    placed = {centre: (cx, cy)} if centre is not None and any(n.id == centre for n in nodes) else {}
    ring = [n for n in nodes if n.id not in placed]
    for i, node in enumerate(ring):
        angle = 2 * math.pi * i / max(1, len(ring)) - math.pi / 2
        placed[node.id] = (cx + RADIUS * math.cos(angle), cy + RADIUS * math.sin(angle))
    return placed


def draw(nodes: Sequence[Node], edges: Sequence[Edge], centre: str | None = None, title: str = "graph") -> str:
    """The SVG element (already-safe HTML) of ``nodes`` and ``edges``; edges to unknown nodes are left out."""
    at = positions(nodes, centre)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
             f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{e(title)}">']
    for edge in edges:
        if edge.source not in at or edge.target not in at:
            continue
        (x1, y1), (x2, y2) = at[edge.source], at[edge.target]
        parts.append(f'<line x1="{x1:.0f}" y1="{y1:.0f}" x2="{x2:.0f}" y2="{y2:.0f}" stroke="#8a94a8" '
                     'stroke-width="1.5"/>')
        parts.append(f'<text x="{(x1 + x2) / 2:.0f}" y="{(y1 + y2) / 2 - 4:.0f}" font-size="11" fill="#6b7385" '
                     f'text-anchor="middle">{e(edge.label)}</text>')
    for node in nodes:
        x, y = at[node.id]
        fill = "#2f6fd6" if node.id == centre else "#5b8f3a"
        parts.append(f'<a href="{e(node.href)}"><circle cx="{x:.0f}" cy="{y:.0f}" r="9" fill="{fill}"/>'
                     f'<text x="{x:.0f}" y="{y + 22:.0f}" font-size="12" text-anchor="middle">'
                     f'{e(node.label[:40])}</text></a>')
    parts.append("</svg>")
    return "".join(parts)
