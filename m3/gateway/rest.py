"""One HTTP route per tool, from the registry: ``POST /v1/tools/{name}``, and ``GET /v1/openapi.json``.

Every call goes through :meth:`Service.call` as the caller ``identify`` names,
so validation, isolation and the token's agent binding are those of MCP and the
CLI; an error is the CLI's error document at the error's ``http_status``. The
OpenAPI document needs no token. Routes, statuses and limits: docs/http.md.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from functools import cache
from typing import Any

from pydantic.json_schema import models_json_schema
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from m3 import __version__
from m3.errors import InvalidArgument, M3Error, Unauthorized, all_error_classes
from m3.gateway.http_guard import error_body
from m3.gateway.registry import Registry
from m3.gateway.service import CallContext, Service

log = logging.getLogger(__name__)

TOOLS_PATH = "/v1/tools"
#: Where MCP over Streamable HTTP is served (``m3 serve`` and the engine).
MCP_PATH = "/mcp"
OPENAPI_PATH = "/v1/openapi.json"

#: Who a request acts as; raises :class:`Unauthorized` when it carries no valid token.
Identify = Callable[[Request], CallContext]


def rest_routes(service: Service, identify: Identify) -> list[Route]:
    """The tool routes and the OpenAPI document, to mount beside ``/mcp``."""

    async def call_tool(request: Request) -> Response:
        name = request.path_params["name"]
        try:
            ctx = identify(request)
            service.registry.get(name)  # an unknown tool is 404 whatever the body says
            result = await service.call(name, await _arguments(request), ctx)
        except M3Error as exc:
            return error_response(exc)
        except Exception:  # never let an internal message escape
            log.exception("HTTP call %s failed", name)
            return error_response(M3Error(f"{name} failed unexpectedly"))
        return JSONResponse(result)

    async def openapi(_request: Request) -> Response:
        return Response(openapi_json(service.registry), media_type="application/json")

    return [Route(f"{TOOLS_PATH}/{{name}}", call_tool, methods=["POST"]),
            Route(OPENAPI_PATH, openapi, methods=["GET"])]


async def _arguments(request: Request) -> Any:
    raw = await request.body()
    if not raw.strip():
        return {}
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise InvalidArgument(f"the request body is not JSON: {exc}",
                              hint="Send the tool's arguments as one JSON object, e.g. {\"query\": \"…\"}.") from None


def error_response(error: M3Error) -> Response:
    headers = {"WWW-Authenticate": 'Bearer realm="m3"'} if isinstance(error, Unauthorized) else None
    return Response(error_body(error), status_code=error.http_status, media_type="application/json",
                    headers=headers)


# --- OpenAPI ------------------------------------------------------------------------------------

_REF = "#/components/schemas/{model}"


def error_schema() -> dict[str, Any]:
    """JSON Schema of the error document, with every code m3 can answer with."""
    codes = sorted({cls.code for cls in all_error_classes()})
    return {
        "type": "object", "required": ["error"], "additionalProperties": False,
        "properties": {"error": {
            "type": "object", "required": ["code", "message", "hint"],
            "properties": {
                "code": {"type": "string", "enum": codes, "description": "Stable error code (docs/errors.md)."},
                "message": {"type": "string"}, "hint": {"type": "string", "description": "What to do next."},
                "details": {"type": "object", "description": "Such as the allowed values or close names."},
            },
        }},
    }


@cache
def openapi_json(registry: Registry) -> str:
    """The OpenAPI 3.1 document of the tool routes (one operation per tool), generated once per registry."""
    tools = list(registry)
    models = [(t.spec.args, "validation") for t in tools] + [(t.spec.result, "serialization") for t in tools]
    refs, defs = models_json_schema(models, ref_template=_REF)  # type: ignore[arg-type]
    schemas: dict[str, Any] = {**defs.get("$defs", {}), "Error": error_schema()}
    statuses = sorted({cls.http_status for cls in all_error_classes()})
    errors = {str(status): {"$ref": "#/components/responses/Error"} for status in statuses}
    paths = {f"{TOOLS_PATH}/{t.spec.name}": {"post": {
        "operationId": t.spec.name, "summary": t.spec.summary, "description": t.spec.description,
        "tags": [t.spec.domain],
        "requestBody": {"required": False, "content": {"application/json": {
            "schema": refs[(t.spec.args, "validation")]}}},
        "responses": {"200": {"description": "The tool's result.", "content": {"application/json": {
            "schema": refs[(t.spec.result, "serialization")]}}}, **errors},
        "x-m3-read-only": t.spec.read_only, "x-m3-destructive": t.spec.destructive,
    }} for t in tools}
    document = {
        "openapi": "3.1.0",
        "info": {"title": "m3 tools", "version": __version__,
                 "description": "Every m3 tool as POST /v1/tools/{name}: the body is the tool's arguments, the "
                                "answer its result, the same documents as the CLI (see docs/http.md)."},
        "paths": paths,
        "components": {
            "schemas": schemas,
            "responses": {"Error": {"description": "An error; error.code says which (docs/errors.md).",
                                    "content": {"application/json": {"schema": {"$ref": _REF.format(model="Error")}}}}},
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer",
                                           "description": "A token from `m3 token create --agent NAME`."}},
        },
        "security": [{"bearer": []}],
    }
    return json.dumps(document)

