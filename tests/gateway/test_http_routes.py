"""The tool routes of ``m3 serve``: ``POST /v1/tools/{name}`` behind bearer tokens, and the OpenAPI document.

The server is m3's own (``serve``) on a loopback port over a started m3;
the client is a real HTTP client. What every tool answers is compared with
MCP and the CLI in test_three_surfaces_agree.py; this file covers the
route's own contract: authentication, the token's agent, status codes, the
OpenAPI document.
"""

from __future__ import annotations

import re
from typing import Any

import httpx2
import pytest
from openapi_spec_validator import validate

from devtools import docs
from m3.errors import all_error_classes
from m3.gateway.registry import default_registry
from m3.gateway.service import Service
from m3.protocols.messages.coordination import RevokeTokens
from tests.gateway.test_mcp_http import serving, token_for

REGISTRY = default_registry()


def base_of(mcp_url: str) -> str:
    return mcp_url.removesuffix("/mcp")


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def error_of(answer: httpx2.Response, status: int) -> dict[str, Any]:
    """The error document of ``answer``, which must have ``status``."""
    assert answer.status_code == status, (answer.status_code, answer.text)
    assert answer.headers["content-type"] == "application/json"
    body: dict[str, Any] = answer.json()
    assert set(body) == {"error"} and {"code", "message", "hint"} <= set(body["error"])
    return body["error"]


@pytest.mark.anyio
async def test_no_token_a_wrong_token_and_a_revoked_token_are_401_with_the_error_document(service: Service) -> None:
    token, token_id = token_for(service, "agent-a")
    async with serving(service) as url, httpx2.AsyncClient(base_url=base_of(url), timeout=30) as http:
        route = "/v1/tools/memory_search"
        missing = await http.post(route, json={"query": "x"})
        assert error_of(missing, 401)["code"] == "unauthorized"
        assert missing.headers["www-authenticate"].startswith("Bearer")
        assert error_of(await http.post(route, json={"query": "x"}, headers=bearer("m3_not-a-token")),
                        401)["code"] == "unauthorized"
        assert (await http.post(route, json={"query": "x"}, headers=bearer(token))).status_code == 200
        service.system.writer.ask(RevokeTokens(token_id=token_id), 30)
        assert error_of(await http.post(route, json={"query": "x"}, headers=bearer(token)), 401)["code"] == \
            "unauthorized"
        # An unknown tool does not tell a caller without a token that it is unknown.
        assert error_of(await http.post("/v1/tools/no_such_tool", json={}), 401)["code"] == "unauthorized"


@pytest.mark.anyio
async def test_a_token_acts_as_its_agent_and_cannot_act_as_another(service: Service) -> None:
    token_a, _ = token_for(service, "agent-a")
    token_b, _ = token_for(service, "agent-b")
    async with serving(service) as url, httpx2.AsyncClient(base_url=base_of(url), timeout=30) as http:
        written = (await http.post("/v1/tools/memory_write", json={"content": "Written over HTTP by agent-a."},
                                   headers=bearer(token_a))).json()
        record = (await http.post("/v1/tools/memory_get", json={"id": written["id"]}, headers=bearer(token_a))).json()
        assert record["agent_id"] == "agent-a"
        for tool, args in (("memory_write", {"content": "forged", "agent_id": "agent-b"}),
                           ("memory_inbox", {"agent_id": "agent-b"}),
                           ("memory_search", {"query": "HTTP", "agent_id": "agent-b"}),
                           ("task_claim", {"agent_id": "agent-b"})):
            answer = await http.post(f"/v1/tools/{tool}", json=args, headers=bearer(token_a))
            assert error_of(answer, 403)["code"] == "forbidden", tool
        sent = (await http.post("/v1/tools/memory_handoff", json={"to_agent": "agent-b", "task": "Review it."},
                                headers=bearer(token_a))).json()
        assert sent["from_agent"] == "agent-a"
        inbox = (await http.post("/v1/tools/memory_inbox", headers=bearer(token_b))).json()
        assert [(i["id"], i["from_agent"]) for i in inbox["items"]] == [(sent["id"], "agent-a")]


@pytest.mark.anyio
async def test_each_kind_of_error_has_its_status_and_code(service: Service) -> None:
    token, _ = token_for(service, "agent-a")
    async with serving(service) as url, \
            httpx2.AsyncClient(base_url=base_of(url), headers=bearer(token), timeout=30) as http:
        unknown = error_of(await http.post("/v1/tools/memory_serach", json={"query": "x"}), 404)
        assert unknown["code"] == "unknown_tool" and "memory_search" in unknown["details"]["did_you_mean"]
        assert error_of(await http.post("/v1/tools/memory_search", json={}), 400)["code"] == "invalid_argument"
        assert error_of(await http.post("/v1/tools/memory_search", content=b"{not json"), 400)["code"] == \
            "invalid_argument"
        assert error_of(await http.post("/v1/tools/memory_search", json=["x"]), 400)["code"] == "invalid_argument"
        missing = "00000000-0000-4000-8000-000000000000"
        assert error_of(await http.post("/v1/tools/memory_get", json={"id": missing}), 404)["code"] == "not_found"
        assert error_of(await http.post("/v1/tools/tools_load_domain", json={"domain": "nope"}), 404)["code"] == \
            "unknown_domain"
        too_long = "x" * (service.config["limits.max_content_chars"] + 1)
        assert error_of(await http.post("/v1/tools/memory_write", json={"content": too_long}), 413)["code"] == \
            "content_too_large"
        task = (await http.post("/v1/tools/task_create", json={"title": "Versioned"})).json()
        stale = {"id": task["id"], "version": task["version"] + 1, "title": "Renamed"}
        assert error_of(await http.post("/v1/tools/task_update", json=stale), 409)["code"] == "conflict"
        assert (await http.get("/v1/tools/memory_search")).status_code == 405  # only POST calls a tool
        listed = await http.post("/v1/tools/agent_list")  # an empty body is no arguments
        assert listed.status_code == 200 and "agents" in listed.json()


def test_only_internal_error_is_http_500_and_every_status_is_a_client_or_server_error() -> None:
    statuses = {cls.code: cls.http_status for cls in all_error_classes()}
    assert [code for code, status in statuses.items() if status == 500] == ["internal_error"]
    assert all(400 <= status < 600 for status in statuses.values())
    assert (statuses["invalid_argument"], statuses["unauthorized"], statuses["forbidden"], statuses["not_found"],
            statuses["unknown_tool"], statuses["conflict"], statuses["request_too_large"]) == (
        400, 401, 403, 404, 404, 409, 413)


@pytest.mark.anyio
async def test_the_openapi_document_is_valid_openapi_3_1_with_one_operation_per_tool_and_needs_no_token(
        service: Service) -> None:
    async with serving(service) as url, httpx2.AsyncClient(base_url=base_of(url), timeout=30) as http:
        answer = await http.get("/v1/openapi.json")
    assert answer.status_code == 200
    document = answer.json()
    validate(document)
    assert document["openapi"].startswith("3.1")
    assert document["security"] == [{"bearer": []}]
    assert document["components"]["securitySchemes"]["bearer"] == {
        "type": "http", "scheme": "bearer", "description": "A token from `m3 token create --agent NAME`."}
    assert sorted(document["paths"]) == sorted(f"/v1/tools/{t.spec.name}" for t in REGISTRY)
    schemas = document["components"]["schemas"]
    for tool in REGISTRY:
        operation = document["paths"][f"/v1/tools/{tool.spec.name}"]["post"]
        assert (operation["operationId"], operation["description"], operation["tags"]) == (
            tool.spec.name, tool.spec.description, [tool.spec.domain])
        request = operation["requestBody"]["content"]["application/json"]["schema"]
        result = operation["responses"]["200"]["content"]["application/json"]["schema"]
        assert set(resolve(schemas, request)["properties"]) == set(tool.input_schema.get("properties", {}))
        assert set(resolve(schemas, result)["properties"]) == set(tool.output_schema["properties"])
        assert {"400", "401", "403", "404", "409", "413", "500"} <= set(operation["responses"])
    codes = schemas["Error"]["properties"]["error"]["properties"]["code"]["enum"]
    assert set(codes) == {cls.code for cls in all_error_classes()}


def resolve(schemas: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` itself, or the component its ``$ref`` names."""
    ref = schema.get("$ref")
    if ref is None:
        return schema
    found: dict[str, Any] = schemas[ref.removeprefix("#/components/schemas/")]
    return found


def test_the_status_table_of_docs_http_md_gives_each_code_the_status_it_has() -> None:
    statuses = {cls.code: cls.http_status for cls in all_error_classes()}
    text = (docs.DOCS_DIR / "http.md").read_text(encoding="utf-8")
    table = text.split("## Errors and HTTP status", 1)[1].split("\n## ", 1)[0]
    documented = {code: int(status) for status, codes in re.findall(r"^\| (\d{3}) \| (.*?) \|", table, re.M)
                  for code in re.findall(r"`(\w+)`", codes) if code in statuses}
    assert len(documented) >= 15
    assert {code: statuses[code] for code in documented} == documented
