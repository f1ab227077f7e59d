"""The other pages: search with its explanation, agents and inboxes, task trees, the graph, conflicts."""

from __future__ import annotations

from typing import Any

from starlette.responses import Response

from m3.gateway.dashboard import html, svg
from m3.gateway.dashboard.html import e, short
from m3.gateway.dashboard.view import View, memory_types


def _signals(item: dict[str, Any]) -> str:
    signals = (item.get("explanation") or {}).get("signals") or {}
    rows = [[e(name), e(s.get("value")), e(s.get("weight")), e(s.get("contribution"))] for name, s in signals.items()]
    return html.table(("signal", "value", "weight", "contribution"), rows, "no explanation")


async def search(view: View) -> Response:
    query, kind = view.arg("q"), view.arg("type")
    form = (f'<form method="get" action="/search" class="filters box">{html.text_input("q", query, "what to find")}'
            f'type {html.select("type", memory_types(), kind)}<button type="submit">Search</button></form>')
    if not query:
        return view.render("Search", "/search", form)
    found = await view.call("memory_search", {"query": query, "type": kind, "k": 10, "explain": True}) or {}
    rows = [[html.link(f"/memory/{i['id']}", short(i["id"])), e(i["type"]), e(str(i["content"])[:200]),
             e(i["score"]), _signals(i)] for i in found.get("items", [])]
    body = form + html.table(("id", "type", "content", "score", "explanation (per signal)"), rows, "no match")
    return view.render("Search", "/search", body)


async def agents(view: View) -> Response:
    listed = await view.call("agent_list", {}) or {}
    rows = [[html.link("/agents", a["id"], agent=a["id"]), e(a.get("role")), e(a.get("status")),
             e(a.get("last_seen_at")), e(a.get("description"))] for a in listed.get("agents", [])]
    body = html.table(("agent", "role", "status", "last seen", "description"), rows, "no agent registered")
    chosen = view.arg("agent")
    if chosen:
        inbox = await view.call("memory_inbox", {"agent_id": chosen, "unread_only": False, "limit": 100}) or {}
        handoffs = [[e(h["created_at"]), e(h["from_agent"]), e(h["task"]), e(h.get("note")),
                     " ".join(html.link(f"/memory/{c['id']}", short(c["id"])) for c in h.get("context", [])),
                     e("read " + h["read_at"]) if h.get("read_at") else "unread"] for h in inbox.get("items", [])]
        body += f"<h2>Inbox of {e(chosen)}: handoffs</h2>" + html.table(
            ("at", "from", "task", "note", "context", "state"), handoffs, "no handoff")
    return view.render("Agents and inboxes", "/agents", body)


def _task_rows(items: list[dict[str, Any]], depth: int = 0) -> list[list[str]]:
    rows: list[list[str]] = []
    for t in items:
        rows.append(["&nbsp;" * 4 * depth + html.link("/tasks", t["title"], root=t["id"]), e(t["state"]),
                     e(t.get("owner")), e(t.get("lease_expires_at")), e(t.get("priority")), e(t.get("version"))])
        rows += _task_rows(t.get("children") or [], depth + 1)
    return rows


def _nested(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The listed tasks as trees: each under its parent when the parent is listed too, else a root."""
    listed = {t["id"] for t in items}
    kids: dict[str | None, list[dict[str, Any]]] = {}
    for t in items:
        kids.setdefault(t["parent_id"] if t["parent_id"] in listed else None, []).append(t)

    def nest(t: dict[str, Any]) -> dict[str, Any]:
        return {**t, "children": [nest(c) for c in kids.get(t["id"], [])]}

    return [nest(t) for t in kids.get(None, [])]


TASK_HEADERS = ("task", "state", "owner", "lease until", "priority", "version")
TASK_STATES = ("pending", "in_progress", "blocked", "completed", "failed", "cancelled")


async def tasks(view: View) -> Response:
    state = view.arg("state")
    listed = await view.call("task_list", {"state": state, "limit": 200}) or {}
    form = (f'<form method="get" action="/tasks" class="filters box">state {html.select("state", TASK_STATES, state)}'
            '<button type="submit">Filter</button></form>')
    body = form + html.table(TASK_HEADERS, _task_rows(_nested(listed.get("items", []))), "no task")
    root = view.arg("root")
    if root:
        tree = await view.call("task_tree", {"id": root, "depth": 5})
        if tree is not None:
            top = tree.get("tree") or tree
            body += "<h2>Tree</h2>" + html.table(TASK_HEADERS, _task_rows([top]))
    return view.render("Task trees", "/tasks", body)


async def graph(view: View) -> Response:
    entity, memory = view.arg("entity"), view.arg("memory")
    body = ""
    listed = await view.call("entity_list", {"limit": 100}) or {}
    entities = listed.get("items", [])
    recent = await view.call("memory_list", {"limit": 30}) or {}
    if not entity and not memory:  # draw something at once: the first entity with neighbours, or a memory's links
        entity = await _connected(view, entities[:5])
        memory = "" if entity or not recent.get("items") else recent["items"][0]["id"]
    if entity:
        walked = await view.call("entity_graph", {"id": entity, "depth": 2, "max_nodes": 40})
        if walked is not None:
            nodes = [svg.Node(n["id"], n.get("name") or n["id"], f"/graph?entity={n['id']}") for n in walked["nodes"]]
            edges = [svg.Edge(x["source"], x["target"], x.get("predicate") or x.get("kind") or "")
                     for x in walked["edges"]]
            body += svg.draw(nodes, edges, entity, "entity graph")
    elif memory:
        walked = await view.call("memory_graph", {"id": memory, "depth": 3})
        if walked is not None:
            nodes = [svg.Node(n["id"], n.get("title") or short(n["id"]), f"/graph?memory={n['id']}")
                     for n in walked["nodes"]]
            edges = [svg.Edge(x["from_id"], x["to_id"], x["type"]) for x in walked["edges"]]
            body += svg.draw(nodes, edges, memory, "memory links")
    if entities:
        rows = [[html.link("/graph", x.get("name") or x["id"], entity=x["id"]), e(x.get("type")), e(x.get("scope")),
                 e(x.get("mentions"))] for x in entities]
        body += "<h2>Entities</h2>" + html.table(("entity", "type", "scope", "mentions"), rows)
    rows = [[html.link("/graph", short(m["id"]), memory=m["id"]), e(m.get("title") or ""), e(str(m["content"])[:100])]
            for m in recent.get("items", [])]
    body += "<h2>Memory links</h2><p class=muted>Pick a memory to draw its links.</p>" + html.table(
        ("memory", "title", "content"), rows)
    return view.render("Graph", "/graph", body)


async def _connected(view: View, entities: list[dict[str, Any]]) -> str:
    """The first of ``entities`` whose neighbourhood has another entity ('' if none)."""
    for x in entities:
        walked = await view.call("entity_graph", {"id": x["id"], "depth": 1, "max_nodes": 2})
        if walked and len(walked["nodes"]) > 1:
            return str(x["id"])
    return ""


async def conflicts(view: View) -> Response:
    status = view.arg("status") or "open"
    listed = await view.call("conflicts_list", {"status": status, "limit": 100}) or {}
    form = (f'<form method="get" action="/conflicts" class="filters box">'
            f'{html.select("status", ("open", "resolved", "all"), status, blank="")}'
            '<button type="submit">Show</button></form>')
    parts = [form]
    for c in listed.get("items", []):
        sides = []
        for key in ("memory_a", "memory_b"):
            m = await view.call("memory_get", {"id": c[key]})
            text = e(m["content"]) if m else "(not visible)"
            sides.append(f'<td>{html.link(f"/memory/{c[key]}", key + " " + short(c[key]))}<pre>{text}</pre></td>')
        parts.append(f'<div class="box"><b>{e(c["kind"])}</b> {e(c.get("reason"))} '
                     f'· similarity {e(c.get("similarity"))}'
                     f' · {e(c["status"])} {e(c.get("resolution") or "")}<table><tr>{"".join(sides)}</tr></table>')
        if c["status"] == "open":
            target = f"/conflicts/{c['id']}/resolve"
            for resolution, label in (("keep_a", "Keep A"), ("keep_b", "Keep B"), ("keep_both", "Keep both")):
                parts.append(html.action(target, view.csrf, label, html.hidden("resolution", resolution)))
            parts.append(html.action(target, view.csrf, "Merge", html.hidden("resolution", "merge")
                                     + '<br><textarea name="content" rows="2" cols="90" placeholder="the merged '
                                     'memory"></textarea><br>', inline=False))
        parts.append("</div>")
    if len(parts) == 1:
        parts.append(f'<p class="muted">no {e(status)} conflict</p>')
    return view.render("Conflicts", "/conflicts", "".join(parts))


async def resolve(view: View, conflict_id: str) -> Response:
    form = await view.form()
    return await view.act("conflicts_resolve", {"id": conflict_id, "resolution": form.get("resolution"),
                                                "content": form.get("content")}, "/conflicts", "resolved")
