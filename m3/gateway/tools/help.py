"""m3_help: one tool described in full, from its spec and the JSON Schemas derived from it.

The error codes are those every call can end with, plus those its arguments and domain imply (an ``id``
argument can name no row, an ``agent_id`` another agent …) and the ones an admin tool declares here; the
error reference itself is docs/errors.md.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from m3.gateway.registry import Tool
from m3.protocols.tools import meta as p

if TYPE_CHECKING:
    from m3.gateway.service import CallContext, Service

#: Every call can end with these.
COMMON = (("invalid_argument", "an argument is missing, unknown or of the wrong type or range"),
          ("timeout", "the actor answering did not reply within actors.ask_timeout_s"),
          ("store_error", "the store could not be reached or refused the transaction"))
#: Implied by an argument of this name.
BY_ARGUMENT = {
    "id": (("not_found", "no row has that id (or it is private to another agent)"),
           ("ambiguous_id", "an id prefix matches several rows")),
    "agent_id": (("forbidden", "a caller bound by a token names another agent"),),
    "content": (("content_too_large", "the content is over limits.max_content_chars"),),
    "confirm": (("confirmation_required", "confirm was not true"),),
}
#: Declared by tool.
BY_TOOL = {
    "admin_import": (("invalid_export", "the file is not an export, or a line of it is malformed"),
                     ("export_too_new", "the file comes from a newer m3 (an unknown schema revision)"),
                     ("export_revision_mismatch", "the file is of an older schema revision"),
                     ("store_not_empty", "the store holds rows and merge is false")),
    "admin_export_inspect": (("invalid_export", "the file is not an export, or a line of it is malformed"),),
    "m3_call": (("unknown_tool", "no tool has that name"),),
    "m3_help": (("unknown_tool", "no tool has that name"),),
}


async def m3_help(svc: Service, a: p.M3HelpArgs, ctx: CallContext) -> p.M3HelpResult:
    tool = svc.registry.get(a.tool)
    spec = tool.spec
    arguments = fields_of(tool.input_schema, with_defaults=True)
    example = {f.name: example_of(tool.input_schema, f.name) for f in arguments if f.required}
    return p.M3HelpResult(
        name=spec.name, domain=spec.domain, description=spec.description, read_only=spec.read_only,
        destructive=spec.destructive, startup=spec.startup, arguments=arguments,
        result=fields_of(tool.output_schema, with_defaults=False), errors=errors_of(tool),
        example={"tool": spec.name, "args": example}, cli=cli_of(spec.domain, spec.name, example))


def fields_of(schema: dict[str, Any], *, with_defaults: bool) -> list[p.FieldHelp]:
    required = set(schema.get("required", ()))
    out = []
    for name, prop in schema.get("properties", {}).items():
        out.append(p.FieldHelp(name=name, type=type_of(prop), required=name in required,
                               default=prop.get("default") if with_defaults else None,
                               description=prop.get("description")))
    return out


def type_of(prop: dict[str, Any]) -> str:
    """A JSON Schema property's type in words: ``string``, ``array of integer``, ``string or null``, ``SearchItem``."""
    if "$ref" in prop:
        return str(prop["$ref"]).rsplit("/", 1)[-1]
    if "anyOf" in prop:
        return " or ".join(dict.fromkeys(type_of(option) for option in prop["anyOf"]))
    if "enum" in prop:
        return "one of " + ", ".join(json.dumps(v) for v in prop["enum"])
    if "const" in prop:
        return json.dumps(prop["const"])
    kind = prop.get("type", "any")
    if kind == "array":
        return f"array of {type_of(prop.get('items', {}))}"
    return str(kind)


def example_of(schema: dict[str, Any], name: str) -> Any:
    """A plausible value of a required argument: its first enum value, else one of its type."""
    prop = schema["properties"][name]
    options = prop.get("anyOf", [prop])
    first: dict[str, Any] = next((o for o in options if o.get("type") != "null"), {})
    if "enum" in first:
        return first["enum"][0]
    return {"integer": 1, "number": 0.5, "boolean": True, "array": [], "object": {}}.get(
        first.get("type", "string"), f"<{name}>")


def errors_of(tool: Tool) -> list[p.ErrorHelp]:
    found: dict[str, str] = dict(COMMON)
    for name in tool.spec.args.model_fields:
        found.update(BY_ARGUMENT.get(name, ()))
    if tool.spec.domain == "admin":
        found["forbidden"] = "the caller is bound by a token: admin tools are the local user's"
    found.update(BY_TOOL.get(tool.spec.name, ()))
    return [p.ErrorHelp(code=code, when=when) for code, when in found.items()]


def cli_of(domain: str, name: str, args: dict[str, Any]) -> str:
    parts = ["m3", domain, name]
    for key, value in args.items():
        shown = value if isinstance(value, str) else json.dumps(value)
        parts += [f"--{key.replace('_', '-')}", json.dumps(shown) if " " in str(shown) else str(shown)]
    return " ".join(parts)
