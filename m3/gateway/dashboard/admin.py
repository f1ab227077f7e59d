"""The audit log with the GDPR actions (export downloads the document, forget asks for the subject's id typed
again), and health (actors, latencies, embedding backlog, store size, loop passes)."""

from __future__ import annotations

import json
import re

from starlette.responses import Response

from m3.gateway.dashboard import html
from m3.gateway.dashboard.html import e
from m3.gateway.dashboard.view import View

AUDIT_FILTERS = ("reader", "subject_agent", "subject_user")


def _subject_fields() -> str:
    return (f'{html.select("kind", ("agent_id", "user_id"), "user_id", blank="")} '
            f'{html.text_input("subject", "", "the agent or user id")} ')


async def audit(view: View) -> Response:
    args = {k: view.arg(k) for k in AUDIT_FILTERS}
    after = int(view.arg("after")) if view.arg("after").isdigit() else 0
    found = await view.call("audit_query", {**args, "after": after, "limit": 200}) or {}
    rows = [[e(r["at"]), e(r["reader"]), e(r["tool"]), e(r["kind"]),
             html.link(f"/memory/{r['ref_id']}", r["ref_id"]) if r["kind"] == "memory" else e(r["ref_id"]),
             e(r.get("subject_agent")), e(r.get("subject_user"))] for r in found.get("items", [])]
    more = (f'<p>{html.link("/audit", "next page (oldest first)", **args, after=found["next_after"])}</p>'
            if found.get("next_after") else "")
    filters = ('<form method="get" action="/audit" class="filters box">'
               + "".join(html.text_input(k, args[k], k.replace("_", " ")) for k in AUDIT_FILTERS)
               + '<button type="submit">Filter</button></form>')
    gdpr = ('<h2>GDPR</h2><div class="box">Export everything m3 holds about one subject as a JSON file: '
            + html.action("/gdpr/export", view.csrf, "Download export", _subject_fields()) + "</div>"
            + '<div class="box err">Forget erases the subject everywhere, for good. Type its id twice: '
            + html.action("/gdpr/forget", view.csrf, "Forget for good",
                          _subject_fields() + html.text_input("confirm", "", "type the id again to confirm"))
            + "</div>")
    body = filters + html.table(("at", "reader", "tool", "kind", "row", "subject agent", "subject user"), rows,
                                "no read recorded") + more + gdpr
    return view.render("Audit log and GDPR", "/audit", body)


def _subject(form: dict[str, str]) -> dict[str, str]:
    kind = "agent_id" if form.get("kind") == "agent_id" else "user_id"
    return {kind: form.get("subject", "")}


async def gdpr_export(view: View) -> Response:
    form = await view.form()
    subject = _subject(form)
    document = await view.call("gdpr_export", subject)
    if document is None:
        return view.render("GDPR export failed", "/audit", '<p><a href="/audit">back</a></p>')
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", next(iter(subject.values())))[:80] or "subject"
    return Response(json.dumps(document, ensure_ascii=False, indent=1), media_type="application/json",
                    headers={"content-disposition": f'attachment; filename="m3-gdpr-{name}.json"'})


async def gdpr_forget(view: View) -> Response:
    form = await view.form()
    subject = _subject(form)
    typed = form.get("confirm", "")
    if not typed or typed != next(iter(subject.values())):
        view.errors.append({"code": "confirmation_needed", "message": "the id typed to confirm does not match",
                            "hint": "Type the subject's id again in the confirmation field; nothing was erased."})
        return view.render("Nothing was forgotten", "/audit", '<p><a href="/audit">back</a></p>')
    return await view.act("gdpr_forget", {**subject, "confirm": True}, "/audit", "forgotten")


def _size(n: int | None) -> str:
    """Bytes for a person: 1.4 MB."""
    if n is None:
        return "unknown"
    size, unit = float(n), "B"
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if size < 1000 or unit == "TB":
            break
        size /= 1000
    return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"


async def health(view: View) -> Response:
    checks = await view.call("diagnostics_health", {}) or {}
    actors = await view.call("diagnostics_actor_stats", {}) or {}
    store = await view.call("diagnostics_store_status", {}) or {}
    backlog = await view.call("admin_embedding_backlog", {}) or {}
    loop = await view.call("loop_status", {}) or {}
    slow = await view.call("diagnostics_slow_calls", {"limit": 10}) or {}
    body = f"<p>overall: <b>{e(checks.get('status'))}</b></p>" + html.table(
        ("check", "status", "message"), [[e(c["check"]), e(c["status"]), e(c["message"])]
                                         for c in checks.get("checks", [])])
    body += "<h2>Actors</h2>" + html.table(
        ("actor", "alive", "queue", "handled", "failed", "restarts", "p50 ms", "p95 ms", "p99 ms"),
        [[e(a["actor"]), e(a["alive"]), e(a["queue_depth"]), e(a["handled"]), e(a["failed"]), e(a["restarts"]),
          e((a.get("latency") or {}).get("p50_ms")), e((a.get("latency") or {}).get("p95_ms")),
          e((a.get("latency") or {}).get("p99_ms"))] for a in actors.get("actors", [])])
    counts = store.get("counts") or {}
    body += "<h2>Store</h2>" + html.table(
        ("backend", "revision", "size", "memories", "current", "retired", "links", "history events", "chat",
         "tasks"),
        [[e(store.get("backend")), e(store.get("revision")), e(_size(store.get("size_bytes"))),
          e(counts.get("memories")), e(counts.get("current")),
          e(counts.get("retired")), e(counts.get("relationships")), e(counts.get("history_events")),
          e(counts.get("chat_messages")), e(counts.get("tasks"))]])
    body += "<h2>Embedding backlog</h2>" + html.table(
        ("model", "state", "pending", "oldest recorded"),
        [[e(m["model"]), e(m["state"]), e(m["pending"]), e(m.get("oldest_recorded_at"))]
         for m in backlog.get("models", [])])
    body += "<h2>Cognitive loop passes</h2>" + html.table(
        ("pass", "enabled", "paused", "runs", "seen", "produced", "failed", "last run", "last error"),
        [[e(p["name"]), e(p["enabled"]), e(p["paused"]), e(p["runs"]), e(p["seen"]), e(p["produced"]),
          e(p["failed"]), e(p.get("last_run")), e(p.get("last_error"))] for p in loop.get("passes", [])])
    body += "<h2>Slowest recent calls</h2>" + html.table(
        ("tool", "ms", "at", "outcome"), [[e(c["tool"]), e(c["ms"]), e(c["at"]), e(c["outcome"])]
                                          for c in slow.get("calls", [])])
    return view.render("Health", "/health", body)
