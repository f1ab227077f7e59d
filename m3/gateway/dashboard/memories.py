"""The memory browser and a memory's page: filters, versions, history, links, ``as_of``, and its actions."""

from __future__ import annotations

import time
from typing import Any

from starlette.responses import Response

from m3.gateway.dashboard import html, svg
from m3.gateway.dashboard.html import e, short
from m3.gateway.dashboard.view import View, epoch_of, iso_of, memory_types

FILTERS = ("type", "scope", "agent_id", "user_id", "conversation_id")


def _in_time(item: dict[str, Any], since: str, until: str) -> bool:
    """Whether the memory was recorded in [since, until) (ISO dates or times; either may be empty)."""
    at = str(item.get("recorded_at") or "")
    return (not since or at >= since) and (not until or at < until)


def memory_rows(items: list[dict[str, Any]]) -> list[list[str]]:
    return [[html.link(f"/memory/{m['id']}", short(m["id"])), e(m["type"]), e(m.get("title") or ""),
             e(str(m["content"])[:160]), e(m["scope"]), e(m.get("agent_id")), e(m.get("user_id")),
             "pinned" if m.get("pinned") else "", e(m.get("recorded_at")),
             "retired" if m.get("retired_at") else "archived" if m.get("archived_at") else "current"]
            for m in items]


MEMORY_HEADERS = ("id", "type", "title", "content", "scope", "agent", "user", "pin", "recorded", "state")


async def browse(view: View) -> Response:
    args: dict[str, Any] = {k: view.arg(k) for k in FILTERS}
    args["include_retired"] = view.arg("include_retired") == "1"
    args["limit"] = 200
    since, until = view.arg("since"), view.arg("until")
    found = await view.call("memory_list", args)
    items = [m for m in (found or {}).get("items", []) if _in_time(m, since, until)]
    stats = await view.call("memory_stats", {})
    counts = (f'<p class="muted">{e(stats["current"])} current, {e(stats["retired"])} retired, '
              f'{e(stats["pinned"])} pinned, {e(stats["archived"])} archived</p>') if stats else ""
    scopes = ("agent", "user", "org")
    retired = ' checked' if args["include_retired"] else ""
    filters = (f'<form method="get" action="/" class="filters box">'
               f'type {html.select("type", memory_types(), args["type"])} '
               f'scope {html.select("scope", scopes, args["scope"])}'
               f'{html.text_input("agent_id", args["agent_id"], "agent")}'
               f'{html.text_input("user_id", args["user_id"], "user")}'
               f'{html.text_input("conversation_id", args["conversation_id"], "conversation")}'
               f'recorded from {html.text_input("since", since, "2026-01-01", "date")}'
               f'to {html.text_input("until", until, "", "date")}'
               f'<label><input type="checkbox" name="include_retired" value="1"{retired}> retired versions</label> '
               f'<button type="submit">Filter</button></form>')
    body = counts + filters + html.table(MEMORY_HEADERS, memory_rows(items), "no memory matches")
    return view.render("Memories", "/", body)


def _history_rows(history: dict[str, Any]) -> list[list[str]]:
    return [[e(ev["at"]), e(ev["event"]), e(ev["actor"]),
             html.link(f"/memory/{ev['memory_id']}", short(ev["memory_id"])),
             html.pretty(ev.get("details") or {})] for ev in history.get("events", [])]


def _slider(memory_id: str, history: dict[str, Any], as_of: str | None) -> str:
    """A GET form with an ``<input type=range>`` from the memory's first event to now (seconds since the epoch)."""
    times = [t for t in (epoch_of(ev["at"]) for ev in history.get("events", [])) if t is not None]
    if not times:
        return ""
    low, high = min(times) + 1, max(max(times) + 1, int(time.time()))
    value = epoch_of(as_of) or high
    return (f'<form method="get" action="/memory/{e(memory_id)}" class="box">as of '
            f'<input type="range" name="as_of" min="{low}" max="{high}" value="{value}"> '
            f'<button type="submit">Show as of then</button> '
            f'<a href="/memory/{e(memory_id)}">now</a></form>')


def _actions(view: View, m: dict[str, Any]) -> str:
    base = f"/memory/{m['id']}"
    current = not m.get("retired_at") and not m.get("archived_at")
    parts = [html.action(f"{base}/unpin" if m.get("pinned") else f"{base}/pin", view.csrf,
                         "Unpin" if m.get("pinned") else "Pin")]
    if current:
        parts.append(html.action(f"{base}/delete", view.csrf, "Archive (soft delete)"))
        parts.append(html.action(f"{base}/update", view.csrf, "Save as a new version",
                                 f'<br><textarea name="content" rows="4" cols="90">{e(m["content"])}</textarea><br>'
                                 f'title {html.text_input("title", m.get("title") or "")} '
                                 f'reason {html.text_input("reason", "", "why")} ', inline=False))
        parts.append(html.action(f"{base}/supersede", view.csrf, "Supersede (the fact changed)",
                                 '<br><textarea name="content" rows="3" cols="90" placeholder="what is true now">'
                                 f'</textarea><br>reason {html.text_input("reason", "", "why")} ', inline=False))
    else:
        parts.append(html.action(f"{base}/restore", view.csrf, "Restore (make current again)"))
    return '<div class="box">' + " ".join(parts) + "</div>"


async def memory_page(view: View, memory_id: str) -> Response:
    as_of = iso_of(view.arg("as_of")) if view.arg("as_of") else None
    memory = await view.call("memory_get", {"id": memory_id, "as_of": as_of})
    history = await view.call("memory_history", {"id": memory_id}) or {}
    if memory is None:
        return view.render(f"Memory {short(memory_id)}", "/", _slider(memory_id, history, as_of))
    graph = await view.call("memory_graph", {"id": memory["id"], "depth": 2}) or {"nodes": [], "edges": []}
    fields = ("type", "title", "scope", "agent_id", "user_id", "conversation_id", "importance", "pinned",
              "valid_from", "valid_to", "recorded_at", "retired_at", "retire_reason", "superseded_by", "archived_at")
    facts = html.table(("field", "value"), [[e(f), e(memory.get(f))] for f in fields])
    versions = html.table(("version",), [[html.link(f"/memory/{v}", v)] for v in history.get("versions", [])])
    body = (_slider(memory_id, history, as_of) + (f'<p class="muted">as of {e(as_of)}</p>' if as_of else "")
            + f'<div class="box"><pre>{e(memory["content"])}</pre></div>{facts}'
            + ("" if as_of else _actions(view, memory))
            + f"<h2>Versions</h2>{versions}<h2>History</h2>"
            + html.table(("at", "event", "actor", "version", "details"), _history_rows(history))
            + "<h2>Links</h2>" + _links(memory["id"], graph))
    return view.render(memory.get("title") or f"Memory {short(memory['id'])}", "/", body)


def _links(memory_id: str, graph: dict[str, Any]) -> str:
    if not graph.get("edges"):
        return '<p class="muted">no links</p>'
    nodes = [svg.Node(n["id"], n.get("title") or short(n["id"]), f"/memory/{n['id']}") for n in graph["nodes"]]
    edges = [svg.Edge(x["from_id"], x["to_id"], x["type"]) for x in graph["edges"]]
    rows = [[html.link(f"/memory/{x['from_id']}", short(x["from_id"])), e(x["type"]),
             html.link(f"/memory/{x['to_id']}", short(x["to_id"]))] for x in graph["edges"]]
    return svg.draw(nodes, edges, memory_id, "memory links") + html.table(("from", "link", "to"), rows)


async def memory_action(view: View, memory_id: str, verb: str) -> Response:
    form = await view.form()
    back = f"/memory/{memory_id}"
    reason = form.get("reason") or None
    if verb in ("pin", "unpin"):
        return await view.act(f"memory_{verb}", {"id": memory_id}, back, verb + "ned")
    if verb == "update":
        return await view.act("memory_update", {"id": memory_id, "content": form.get("content"),
                                                "title": form.get("title"), "reason": reason}, back, "edited")
    if verb == "supersede":
        return await view.act("memory_supersede", {"id": memory_id, "content": form.get("content"),
                                                   "reason": reason}, back, "superseded")
    if verb == "delete":
        return await view.act("memory_delete", {"id": memory_id, "reason": reason}, back, "archived")
    return await view.act("memory_restore", {"id": memory_id, "reason": reason}, back, "restored")
