"""The diagnostics tools: the store's status, the actors' statistics and the settings, none showing a secret."""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio
from sqlalchemy import make_url

from m3.actors.system import ActorSystem
from m3.config import load_config
from m3.errors import M3Error
from m3.gateway.registry import default_registry
from m3.gateway.service import CallContext, Service
from m3.store.migrations import HEAD
from tests.gateway.outcomes import Run
from tests.helpers import call

PASSWORD = "hunter2-never-shown"
EMBED_KEY = "embed-key-never-shown"


def with_password(url: str) -> str:
    """``url`` carrying a password: PostgreSQL over the embedded cluster's socket trusts and ignores it;
    a SQLite URL has none to carry, so it stays as it is."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "postgresql":
        return url
    return parsed.set(password=PASSWORD).render_as_string(hide_password=False)


def test_store_status_counts_memories_chat_agents_and_tasks_through_the_searcher(service: Service) -> None:
    ctx = CallContext(agent_id="local")
    call(service, "memory_write", ctx, content="The boiler is serviced in October.")
    retired = call(service, "memory_write", ctx, content="The spare key is under the mat.")
    call(service, "memory_delete", ctx, id=retired["id"])
    call(service, "chatlog_write", ctx, conversation_id="c1", role="user", content="Hello there.")
    call(service, "agent_register", ctx)
    call(service, "task_create", ctx, title="Service the boiler")
    service.system.wait_embedded()
    status = call(service, "diagnostics_store_status")
    assert (status["revision"], status["head"], status["current"]) == (HEAD, HEAD, True)
    assert status["backend"] in {"sqlite", "postgresql"}
    assert status["url_origin"] == "env"
    counts = status["counts"]
    assert (counts["current"], counts["retired"], counts["chat_messages"], counts["agents"], counts["tasks"]) == (
        1, 1, 1, 1, 1)
    assert sum(counts["vectors_by_model"].values()) >= 1
    assert (status["postgres"] is not None) == (status["backend"] == "postgresql")
    # The bytes on disk: at least the pages the schema and these rows fill (SQLite's file is one page of 4 kB
    # per table and index at least; PostgreSQL's database several MB).
    assert status["size_bytes"] > 100_000


def test_the_store_size_grows_with_what_it_holds(service: Service) -> None:
    before = call(service, "diagnostics_store_status")["size_bytes"]
    call(service, "memory_write_bulk", memories=[{"content": f"Note {n}: " + "words of a longer note " * 40}
                                                 for n in range(200)])
    after = call(service, "diagnostics_store_status")["size_bytes"]
    assert after > before


def test_actor_stats_lists_every_actor_of_the_system_and_the_routers(service: Service) -> None:
    call(service, "memory_write", content="The boiler is serviced in October.")
    stats = call(service, "diagnostics_actor_stats")["actors"]
    names = [row["actor"] for row in stats]
    assert names == [row["actor"] for row in service.system.statistics()]
    assert names[-1] == "routers" and {"writer", "searcher"} <= {n.lower() for n in names}
    actors = [row for row in stats if row["actor"] != "routers"]
    assert all(row["alive"] and row["failed"] == 0 and row["restarts"] == 0 for row in actors)
    assert sum(row["handled"] for row in actors) >= 1


def test_actor_stats_shows_each_actors_handling_time_percentiles(service: Service) -> None:
    for n in range(3):
        call(service, "memory_write", content=f"Reading number {n} of the water meter.")
    call(service, "memory_search", query="water meter")
    stats = {row["actor"]: row for row in call(service, "diagnostics_actor_stats")["actors"]}
    for name in ("writer", "searcher"):
        latency = stats[name]["latency"]
        assert latency["samples"] >= 1
        assert 0 <= latency["p50_ms"] <= latency["p95_ms"] <= latency["p99_ms"]
    assert stats["routers"]["latency"] is None  # routers come and go; each one's own row is not kept


def test_config_shows_every_setting_with_its_origin_and_no_secret_value(env: dict[str, str], store_url: str,
                                                                       system: ActorSystem) -> None:
    config = load_config({**env, "M3_STORE_URL": with_password(store_url), "M3_EMBED_KEY": EMBED_KEY})
    service = Service(config, system, default_registry())
    settings = {row["key"]: row for row in call(service, "diagnostics_config")["settings"]}
    assert list(settings) == [row["key"] for row in config.rows()]
    assert settings["store.url"] == {"key": "store.url", "value": "<set, hidden>", "origin": "env",
                                     "env": "M3_STORE_URL"}
    assert settings["embed.key"]["value"] == "<set, hidden>"
    assert settings["search.k"]["origin"] == "default"
    status = call(service, "diagnostics_store_status")
    for result in (settings, status):
        text = json.dumps(result)
        assert PASSWORD not in text and EMBED_KEY not in text


def test_the_cli_shows_status_stats_and_settings_without_the_vaults_secrets(cli: Run, store_url: str) -> None:
    cli("secret", "set", "store.url", stdin=with_password(store_url)).document()
    cli("secret", "set", "embed.key", stdin=EMBED_KEY).document()
    cli("memory", "memory_write", "--content", "kept under an encrypted URL").document()
    outputs = []
    for argv in (("diagnostics", "store_status"), ("diagnostics", "diagnostics_actor_stats"),
                 ("diagnostics", "config")):
        outcome = cli(*argv)
        outputs.append(outcome.stdout + outcome.stderr)
        document = outcome.document()
        if argv[1] == "store_status":
            # The CLI's engine answers: it was handed the store URL the CLI read from the vault.
            assert (document["current"], document["counts"]["current"]) == (True, 1)
        elif argv[1] == "config":
            rows = {row["key"]: row for row in document["settings"]}
            assert rows["store.url"]["value"] == rows["embed.key"]["value"] == "<set, hidden>"
        else:
            assert document["actors"][-1]["actor"] == "routers"
    assert not any(PASSWORD in text or EMBED_KEY in text for text in outputs)


def with_args(service: Service, name: str, args: dict[str, Any]) -> dict[str, Any]:
    """``call`` for tools with an argument named ``tool`` (which ``call``'s own parameter would take)."""
    result: dict[str, Any] = trio.run(service.call, name, args, CallContext(agent_id="local"))
    return result


def test_health_sums_up_store_schema_actors_backlog_and_engine(service: Service) -> None:
    call(service, "memory_write", content="The heat pump was serviced in May.")
    service.system.wait_embedded()
    health = call(service, "diagnostics_health")
    checks = {c["check"]: c for c in health["checks"]}
    assert list(checks) == ["store", "schema", "embedding_backlog", "actors", "engine"]
    assert health["status"] == "ok" and all(c["status"] == "ok" for c in checks.values())
    assert "embedded" in checks["engine"]["message"]


def test_slow_calls_lists_the_slowest_recent_calls_without_their_arguments(service: Service) -> None:
    secret = "The vault code is 8841."
    call(service, "memory_write", content=secret)
    call(service, "memory_search", query="vault code")
    with pytest.raises(M3Error):
        call(service, "memory_get", id="no-such-memory")
    slow = call(service, "diagnostics_slow_calls", limit=10)
    assert slow["considered"] >= 3
    assert [c["ms"] for c in slow["calls"]] == sorted((c["ms"] for c in slow["calls"]), reverse=True)
    outcomes = {c["tool"]: c["outcome"] for c in slow["calls"]}
    assert outcomes["memory_write"] == "ok" and outcomes["memory_get"] == "not_found"
    assert "8841" not in json.dumps(slow) and "vault" not in json.dumps(slow)
    # Another agent, bound by a token, may call it (diagnostics are open to every caller) and learns no content.
    seen = call(service, "diagnostics_slow_calls", CallContext(agent_id="other", bound=True))
    assert seen["calls"] and "8841" not in json.dumps(seen)
    only = with_args(service, "diagnostics_slow_calls", {"tool": "memory_search"})
    assert [c["tool"] for c in only["calls"]] == ["memory_search"]


def test_help_describes_one_tool_in_full_and_its_example_call_runs(service: Service) -> None:
    helped = with_args(service, "m3_help", {"tool": "memory_search"})
    arguments = {a["name"]: a for a in helped["arguments"]}
    assert arguments["query"]["required"] is True and arguments["query"]["type"] == "string"
    assert arguments["k"]["required"] is False and "integer" in arguments["k"]["type"]
    assert {"count", "items"} <= {f["name"] for f in helped["result"]}
    assert helped["destructive"] is False and helped["read_only"] is True
    assert {"invalid_argument", "timeout"} <= {e["code"] for e in helped["errors"]}
    assert helped["example"]["tool"] == "memory_search" and helped["cli"].startswith("m3 memory memory_search")
    admin = with_args(service, "m3_help", {"tool": "admin_import"})
    assert {"store_not_empty", "export_too_new", "invalid_export", "forbidden"} <= {e["code"] for e in admin["errors"]}
    ran = with_args(service, "m3_call", helped["example"])
    assert "count" in ran["result"]
    with pytest.raises(M3Error) as raised:
        with_args(service, "m3_help", {"tool": "memory_serch"})
    assert raised.value.code == "unknown_tool"
