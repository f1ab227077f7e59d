"""One HTTP route per tool, from the registry: ``POST /v1/tools/{name}``, and ``GET /v1/openapi.json``.

The body is the tool's JSON arguments (an empty body is ``{}``); a success
is 200 with the tool's result, the same document the CLI prints. An error
is the CLI's error document ``{"error": {"code", "message", "hint", ...}}``
at the error's ``http_status`` (declared on the error tree in
``m3.errors``; docs/http.md lists them). Every call goes through
:meth:`Service.call` as the caller ``identify`` names, so validation,
isolation and the token's agent binding are the same as over MCP and the
CLI. The OpenAPI 3.1 document is generated from the same pydantic models
and needs no token: it describes the public contract only.
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
        return JSONResponse(openapi_document(service.registry))

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


def error_statuses() -> dict[int, list[str]]:
    """Every HTTP status an error can have, with its codes."""
    out: dict[int, list[str]] = {}
    for cls in all_error_classes():
        out.setdefault(cls.http_status, []).append(cls.code)
    return dict(sorted(out.items()))


@cache
def _cached_document(registry: Registry) -> str:
    tools = list(registry)
    models = [(t.spec.args, "validation") for t in tools] + [(t.spec.result, "serialization") for t in tools]
    refs, defs = models_json_schema(models, ref_template=_REF)  # type: ignore[arg-type]
    schemas: dict[str, Any] = {**defs.get("$defs", {}), "Error": error_schema()}
    errors = {str(status): {"$ref": "#/components/responses/Error"} for status in error_statuses()}
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


def openapi_document(registry: Registry) -> dict[str, Any]:
    """The OpenAPI 3.1 document of the tool routes (one operation per tool), generated once per registry."""
    document: dict[str, Any] = json.loads(_cached_document(registry))
    return document
