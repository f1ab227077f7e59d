"""The dashboard over HTTP (Starlette's test client on trio), on both stores: every page shows the store's data,
the filters narrow it, the actions change the store through the tools, and the guard refuses what it must."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
import trio
from starlette.testclient import TestClient

from m3.errors import InvalidArgument
from m3.gateway.dashboard.app import build_app
from m3.gateway.dashboard.calls import ServiceCaller
from m3.gateway.dashboard.security import Policy
from m3.gateway.dashboard.serve import policy_for
from m3.gateway.service import CallContext, Service
from tests.gateway.dashboard.seed import seed
from tests.helpers import call

ORIGIN = "http://127.0.0.1:8088"
PAGES = ("/", "/search?q=laptops", "/agents?agent=agent-b", "/tasks", "/graph", "/conflicts", "/audit", "/health")
DASH = CallContext(agent_id="dashboard")


@pytest.fixture
def seeded(service: Service) -> dict[str, Any]:
    return trio.run(seed, service)


@pytest.fixture
def client(service: Service) -> Iterator[TestClient]:
    app = build_app(ServiceCaller(service, "dashboard"), Policy(host="127.0.0.1", port=8088))
    with TestClient(app, base_url=ORIGIN, backend="trio") as http:
        yield http


def csrf_of(page: str) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', page)
    assert found, "the page has no form with a CSRF token"
    return found.group(1)


def post(http: TestClient, path: str, data: dict[str, str], **headers: str) -> Any:
    return http.post(path, data=data, headers={"origin": ORIGIN, **headers}, follow_redirects=False)


def test_every_page_renders_the_stores_data_with_the_security_headers(client: TestClient, service: Service,
                                                                        seeded: dict[str, Any]) -> None:
    expected = {"/": "Order 4411", "/search?q=laptops": "bm25", "/agents?agent=agent-b": "check the laptop orders",
                "/tasks": 'agent-b', "/graph": "Alice Smith", "/conflicts": "4411 vs 4412",
                "/audit": "memory_list", "/health": "writer"}
    for path in PAGES:
        answer = client.get(path)
        assert answer.status_code == 200, (path, answer.text[:500])
        assert expected[path] in answer.text, path
        assert "<script" not in answer.text
        assert "script-src 'none'" in answer.headers["content-security-policy"]
        assert (answer.headers["x-frame-options"], answer.headers["x-content-type-options"]) == ("DENY", "nosniff")
        assert answer.headers["referrer-policy"] == "same-origin"
    tasks = client.get("/tasks").text  # the subtask nested under its parent, with the lease its claimer holds
    assert re.search(r"Ship the laptops.*(&nbsp;){4}<a [^>]*>Pack the laptops</a>", tasks)
    memory = client.get(f"/memory/{seeded['decision']}").text
    assert "two reviewers" in memory and 'type="range"' in memory and "<svg" in memory and "Order 4411" in memory
    versions = re.findall(r'href="/memory/([0-9a-f-]{36})">\1<', memory)
    assert len(versions) == 2  # the edit kept the first version
    history = call(service, "memory_history", DASH, id=seeded["decision"])
    updated = next(ev["at"] for ev in history["events"] if ev["event"] == "updated")
    before = datetime.fromisoformat(updated.replace("Z", "+00:00")).timestamp() - 0.001
    as_of = client.get(f"/memory/{seeded['decision']}", params={"as_of": f"{before:.3f}"}).text
    assert "review by Bob Jones.</pre>" in as_of and "Save as a new version" not in as_of  # the first version
    drawn = client.get(f"/graph?memory={seeded['decision']}").text
    assert "<svg" in drawn and "related" in drawn


def test_the_filters_narrow_the_memory_list(client: TestClient, seeded: dict[str, Any]) -> None:
    decisions = client.get("/?type=decision").text
    assert "Deploy rule" in decisions and "Order 4411" not in decisions
    users = client.get("/?scope=user&user_id=alice").text
    assert "Order 4411" in users and "Deploy rule" not in users
    assert "Deploy rule" in client.get("/?conversation_id=conv-1").text
    assert "Order 4411" not in client.get("/?agent_id=agent-b").text
    assert "no memory matches" in client.get("/?since=2999-01-01").text
    assert "Order 4411" in client.get("/?since=2000-01-01&until=2999-01-01").text


def test_pin_edit_resolve_export_and_forget_change_the_store(client: TestClient, service: Service,
                                                             seeded: dict[str, Any]) -> None:
    order = seeded["order_a"]
    token = csrf_of(client.get(f"/memory/{order}").text)
    assert post(client, f"/memory/{order}/pin", {"csrf": token}).status_code == 303
    assert call(service, "memory_get", DASH, id=order)["pinned"] is True
    assert post(client, f"/memory/{order}/update", {"csrf": token, "content": "Customer 4411 ordered 4 laptops.",
                                                    "reason": "recount"}).status_code == 303
    history = call(service, "memory_history", DASH, id=order)
    assert call(service, "memory_get", DASH, id=order)["content"] == "Customer 4411 ordered 4 laptops."
    assert any(ev["actor"] == "dashboard" and ev["event"] == "updated" for ev in history["events"])
    decision = seeded["decision"]
    assert post(client, f"/memory/{decision}/delete", {"csrf": token}).status_code == 303
    assert call(service, "memory_list", DASH, type="decision")["count"] == 0
    assert post(client, f"/memory/{decision}/restore", {"csrf": token}).status_code == 303
    assert call(service, "memory_list", DASH, type="decision")["count"] == 1
    assert post(client, f"/memory/{decision}/supersede", {"csrf": token, "content": "We deploy any weekday.",
                                                          "reason": "new policy"}).status_code == 303
    assert [m["content"] for m in call(service, "memory_list", DASH, type="decision")["items"]] == \
        ["We deploy any weekday."]
    assert seeded["conflict"] is not None
    answer = post(client, f"/conflicts/{seeded['conflict']}/resolve", {"csrf": token, "resolution": "keep_both"})
    assert answer.status_code == 303
    resolved = call(service, "conflicts_list", DASH, status="resolved")["items"]
    assert [(c["id"], c["resolution"], c["resolved_by"]) for c in resolved] == \
        [(seeded["conflict"], "keep_both", "dashboard")]
    export = post(client, "/gdpr/export", {"csrf": token, "kind": "user_id", "subject": "alice"})
    assert export.status_code == 200 and "attachment" in export.headers["content-disposition"]
    assert {m["id"] for m in export.json()["memories"]} >= {seeded["order_a"], seeded["order_b"]}
    refused = post(client, "/gdpr/forget", {"csrf": token, "kind": "user_id", "subject": "alice", "confirm": "alic"})
    assert refused.status_code == 400 and "confirmation_needed" in refused.text
    assert call(service, "memory_list", DASH, user_id="alice")["count"] == 2
    done = post(client, "/gdpr/forget", {"csrf": token, "kind": "user_id", "subject": "alice", "confirm": "alice"})
    assert done.status_code == 303
    assert call(service, "memory_list", DASH, user_id="alice")["count"] == 0


def test_a_post_without_the_csrf_token_from_another_origin_or_host_changes_nothing(
        client: TestClient, service: Service, seeded: dict[str, Any]) -> None:
    order = seeded["order_a"]
    token = csrf_of(client.get(f"/memory/{order}").text)
    pin = f"/memory/{order}/pin"
    assert post(client, pin, {}).status_code == 403
    assert post(client, pin, {"csrf": "0" * 64}).status_code == 403
    assert post(client, pin, {"csrf": token}, origin="http://evil.example").status_code == 403
    no_origin = client.post(pin, data={"csrf": token}, follow_redirects=False)
    assert no_origin.status_code == 403  # neither Origin nor Referer
    assert post(client, pin, {"csrf": token}, host="evil.example:8088").status_code == 400
    assert client.get("/", headers={"host": "rebound.example:8088"}).status_code == 400
    other_session = TestClient(client.app, base_url=ORIGIN, backend="trio")
    assert post(other_session, pin, {"csrf": token}).status_code == 403  # a token is bound to its session
    assert call(service, "memory_get", DASH, id=order)["pinned"] is False
    forget = post(client, "/gdpr/forget", {"kind": "user_id", "subject": "alice", "confirm": "alice"})
    assert forget.status_code == 403
    assert call(service, "memory_list", DASH, user_id="alice")["count"] == 2
    # The same request from this dashboard's page (a browser that sends Referer but no Origin) goes through.
    mine = client.post(pin, data={"csrf": token}, headers={"referer": f"{ORIGIN}/memory/{order}"},
                       follow_redirects=False)
    assert mine.status_code == 303 and call(service, "memory_get", DASH, id=order)["pinned"] is True


@pytest.mark.store_only("sqlite", reason="the guard's checks run before any tool call; the store does not matter")
def test_off_loopback_the_dashboard_needs_its_token(service: Service) -> None:
    with pytest.raises(InvalidArgument) as refused:
        policy_for(service.config, "0.0.0.0")
    assert "dashboard.token" in (refused.value.hint or "")
    secret = "s3cret-dashboard-token"
    policy = policy_for(service.config.with_overrides(dashboard__token=secret), "192.0.2.7")
    app = build_app(ServiceCaller(service, "dashboard"), Policy(host="192.0.2.7", port=8088, token=policy.token))
    with TestClient(app, base_url="http://192.0.2.7:8088", backend="trio") as http:
        denied = http.get("/health")
        assert denied.status_code == 401 and denied.headers["www-authenticate"].startswith("Basic")
        assert http.get("/health", auth=("me", "wrong")).status_code == 401
        shown = http.get("/health", auth=("me", secret))
        assert shown.status_code == 200 and secret not in shown.text
    assert policy_for(service.config, "127.0.0.1").token is None
    wildcard = Policy(host="0.0.0.0", port=8088, token=secret)
    assert wildcard.host_ok("m3-box.lan:8088") and not wildcard.host_ok("m3-box.lan:9999")
    assert not Policy(host="127.0.0.1", port=8088).host_ok("m3-box.lan:8088")
