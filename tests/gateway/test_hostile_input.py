"""Hostile input through the real MCP client and the real command line: coded errors, nothing written.

Times at the edge of the calendar, integers beyond the store's columns, oversized free text and JSON,
characters no store keeps: each is refused by validation with a stable code (``invalid_time``,
``invalid_argument``, ``field_too_large``, ``content_too_large``) before any actor sees it, on both stores.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
import sqlalchemy as sa

from m3.config import Config
from m3.gateway.registry import default_registry
from m3.gateway.service import Service
from m3.protocols.tools.fields import MAX_STORE_INT
from tests.gateway.outcomes import Run
from tests.gateway.test_mcp_inprocess import connect, m3_call, ok, tool_error

pytestmark = pytest.mark.anyio

LATE = "9999-12-31T23:59:59-12:00"  # after 9999-12-31T23:59:59 UTC
EARLY = "0001-01-01T00:00:00+14:00"  # before 0001-01-01T00:00:00 UTC
CALENDAR_EDGES = [
    ("memory_write", {"content": "x", "expires_at": LATE}),
    ("memory_write", {"content": "x", "valid_from": EARLY}),
    ("memory_search", {"query": "x", "as_of": LATE}),
    ("memory_search", {"query": "x", "as_of": EARLY}),
    ("chatlog_write", {"conversation_id": "c1", "role": "user", "content": "x", "at": LATE}),
    ("chatlog_write", {"conversation_id": "c1", "role": "user", "content": "x", "at": EARLY}),
]


def rows(store_url: str) -> int:
    """Memories plus chat messages plus inbox entries plus tasks, read straight from the store."""
    engine = sa.create_engine(store_url)
    try:
        with engine.connect() as conn:
            return sum(int(conn.execute(sa.text(f"SELECT count(*) FROM {table}")).scalar_one())
                       for table in ("memories", "chatlog", "inbox", "tasks"))
    finally:
        engine.dispose()


async def call(service: Service, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    """The coded error of a call that must fail, made through the MCP client (m3_call for unlisted tools)."""
    async with connect(service) as client:
        listed = {t.name for t in (await client.list_tools()).tools}
        result = await (client.call_tool(tool, args) if tool in listed else m3_call(client, tool, **args))
        return tool_error(result)


@pytest.mark.parametrize(("tool", "args"), CALENDAR_EDGES)
async def test_a_time_beyond_the_calendar_after_its_offset_is_invalid_time(
        service: Service, store_url: str, tool: str, args: dict[str, Any]) -> None:
    error = await call(service, tool, args)
    assert error["code"] == "invalid_time"
    assert "outside the years 1 to 9999" in error["message"]
    assert rows(store_url) == 0


async def test_the_last_and_first_representable_times_are_accepted(service: Service) -> None:
    async with connect(service) as client:
        written = ok(await client.call_tool("memory_write", {"content": "far future", "expires_at":
                                                             "9999-12-31T23:59:59+00:00"}))
        ok(await client.call_tool("memory_search", {"query": "future", "as_of": "0001-01-01T00:00:00Z"}))
        record = ok(await client.call_tool("memory_get", {"id": written["id"]}))
    assert record["expires_at"] == "9999-12-31T23:59:59.000000Z"


@pytest.mark.parametrize(("tool", "args"), [
    ("chatlog_write", {"conversation_id": "c1", "role": "user", "content": "x", "turn": 2**63}),
    ("chatlog_write", {"conversation_id": "c1", "role": "user", "content": "x", "turn": MAX_STORE_INT + 1}),
    ("memory_search", {"query": "x", "k": 2**63}),
    ("task_update", {"id": "0123456789", "version": 2**63, "state": "cancelled"}),
])
async def test_an_integer_beyond_the_stores_columns_is_refused_by_validation_without_an_error_in_the_log(
        service: Service, store_url: str, caplog: pytest.LogCaptureFixture, tool: str, args: dict[str, Any]) -> None:
    with caplog.at_level(logging.ERROR):
        error = await call(service, tool, args)
    assert error["code"] == "invalid_argument"
    assert "less than or equal to 2147483647" in error["message"]
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []
    assert rows(store_url) == 0


async def test_the_largest_turn_the_store_keeps_is_accepted(service: Service) -> None:
    async with connect(service) as client:
        written = ok(await m3_call(client, "chatlog_write", conversation_id="c1", role="user", content="x",
                                   turn=MAX_STORE_INT))
    assert written["result"]["turn"] == MAX_STORE_INT


BIG_JSON = {"blob": "x" * 70_000}
BIG_TEXT = "y" * 20_001


@pytest.mark.parametrize(("tool", "args", "field", "unit"), [
    ("memory_write", {"content": "x", "metadata": BIG_JSON}, "metadata", "bytes"),
    ("notify", {"to_agent": "bob", "message": BIG_TEXT}, "message", "characters"),
    ("notify", {"to_agent": "bob", "message": "hi", "data": BIG_JSON}, "data", "bytes"),
    ("memory_handoff", {"to_agent": "bob", "task": BIG_TEXT}, "task", "characters"),
    ("agent_register", {"agent_id": "bob", "metadata": BIG_JSON}, "metadata", "bytes"),
    ("task_create", {"title": "t", "metadata": BIG_JSON}, "metadata", "bytes"),
    ("memory_search", {"query": BIG_TEXT}, "query", "characters"),
])
async def test_every_free_text_and_json_field_has_a_size_limit_with_a_coded_error(
        service: Service, store_url: str, tool: str, args: dict[str, Any], field: str, unit: str) -> None:
    error = await call(service, tool, args)
    assert error["code"] == "field_too_large"
    details = error["details"]
    assert (details["field"], details["unit"]) == (field, unit)
    assert details["size"] > details["limit"] == {"bytes": 65_536, "characters": 20_000}[unit]
    assert details["setting"].startswith("limits.")
    assert rows(store_url) == 0


async def test_a_field_with_a_declared_length_reports_its_size_and_limit(service: Service) -> None:
    error = await call(service, "memory_write", {"content": "x", "title": "t" * 501})
    assert error["code"] == "field_too_large"
    assert {k: error["details"][k] for k in ("field", "size", "limit", "unit")} == {
        "field": "title", "size": 501, "limit": 500, "unit": "characters"}


async def test_the_limits_are_settings(config: Config, service: Service) -> None:
    tight = Service(config.with_overrides(limits__max_json_bytes=20, limits__max_text_chars=3),
                    service.system, default_registry())
    error = await call(tight, "memory_write", {"content": "x", "metadata": {"k": "0123456789abcdef"}})
    assert (error["code"], error["details"]["limit"]) == ("field_too_large", 20)
    assert (await call(tight, "memory_search", {"query": "four"}))["details"]["limit"] == 3
    async with connect(tight) as client:
        ok(await client.call_tool("memory_write", {"content": "x", "metadata": {"k": 1}}))


@pytest.mark.parametrize(("args", "problem"), [
    ({"content": "a\x00b"}, "NUL"),
    ({"content": "ok", "metadata": {"k\x00": 1}}, "NUL"),
    ({"content": "ok", "title": "\ud800"}, "lone surrogate"),
    ({"content": "ok", "metadata": {"n": float("nan")}}, "finite"),
    ({"content": "ok", "importance": float("inf")}, "finite"),
    ({"content": "ok", "metadata": {"d": json.loads("[" * 40 + "]" * 40)}}, "nesting"),
])
async def test_what_no_store_keeps_is_refused_before_the_store(
        service: Service, store_url: str, args: dict[str, Any], problem: str) -> None:
    error = await service_error(service, "memory_write", args)
    assert error["code"] in ("invalid_argument", "field_too_large")
    assert problem in error["message"]
    assert rows(store_url) == 0


async def service_error(service: Service, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    """Through the service every surface calls: NaN and lone surrogates cannot cross the MCP client's JSON."""
    from m3.errors import M3Error
    from m3.gateway.service import CallContext

    with pytest.raises(M3Error) as raised:
        await service.call(tool, args, CallContext(agent_id="local"))
    return raised.value.to_dict()


# -- the command line ----------------------------------------------------------------------------------


def test_on_the_command_line_a_time_beyond_the_calendar_is_invalid_time_without_a_traceback(m3: Run) -> None:
    done = m3("memory", "write", "--content", "x", "--expires-at", LATE)
    assert done.error()["code"] == "invalid_time"
    assert "Traceback" not in done.stderr
    assert m3("chatlog", "write", "--conversation-id", "c", "--role", "user", "--content", "x", "--turn",
              str(2**63)).error()["code"] == "invalid_argument"


def test_the_meta_tools_work_on_the_command_line_as_over_mcp(m3: Run) -> None:
    called = m3("tools", "m3_call", "--tool", "tools_list_domains").document()
    assert called["tool"] == "tools_list_domains"
    assert "memory" in {d["domain"] for d in called["result"]["domains"]}
    piped = m3("tools", "m3_call", "--json-file", "-", stdin=json.dumps(
        {"tool": "memory_write", "args": {"content": "Piped through m3_call.", "type": "fact"}})).document()
    assert piped["result"]["created"] is True
    with_args = m3("tools", "m3_call", "--tool", "memory_get", "--args", json.dumps({"id": piped["result"]["id"]}))
    assert with_args.document()["result"]["content"] == "Piped through m3_call."
    every = m3("tools", "m3_index").document()["tools"]
    assert {t["name"] for t in every} == {t.spec.name for t in default_registry()}
    chat = m3("tools", "m3_index", "--domain", "chatlog").document()["tools"]
    assert {t["domain"] for t in chat} == {"chatlog"}
    assert m3("tools", "m3_index", "--domain", "nope").error()["code"] == "unknown_domain"
