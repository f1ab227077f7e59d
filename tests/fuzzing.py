"""Hostile arguments for any tool, generated from its JSON Schema with hypothesis.

Each property gets either a value shaped by its schema (so that calls reach past validation into the
actors and the store) or a hostile one: a wrong type, an integer beyond 64 bits, a time at the edge of the
calendar with an offset, unicode and NUL characters, lone surrogates, deeply nested JSON, very long text.
Known ids (``known``) are mixed into strings so that calls also hit real memories and tasks.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from hypothesis import strategies as st

#: Examples per fuzz test; CI keeps the default (a few seconds), longer runs set M3_FUZZ_EXAMPLES.
EXAMPLES = int(os.environ.get("M3_FUZZ_EXAMPLES", "40"))

EDGE_TIMES = (
    "9999-12-31T23:59:59-12:00", "0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59.999999Z",
    "0001-01-01T00:00:00Z", "2026-02-30T00:00:00Z", "2026-01-01T24:00:00Z", "1970-01-01T00:00:00+23:59",
    "99999-01-01T00:00:00Z", "-0001-01-01T00:00:00Z", "2026-11-30", "now", "",
)
EDGE_INTS = (0, -1, 1, 2**31 - 1, 2**31, 2**63 - 1, 2**63, -(2**63) - 1, 10**30, -(10**30))
EDGE_FLOATS = (0.0, -0.0, 1e-300, 1e308, -1e308, 0.5, 600.0000001, 5e-324)
WEIRD_TEXT = ("", " ", "\x00", "a\x00b", "\ud800", "\udfff x", "\u202e\u0644\u0627", "🧠" * 50,
              "'; DROP TABLE memories;--", "%s%n", "\\", '"', "NULL", "\n\r\t", "ß" * 3, "\ufeff", "a" * 70_000)


def deep_json(depth: int) -> Any:
    value: Any = 1
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


def hostile() -> st.SearchStrategy[Any]:
    """A value that is wrong for almost any field."""
    return st.one_of(
        st.none(), st.booleans(), st.sampled_from(EDGE_INTS), st.integers(), st.sampled_from(EDGE_FLOATS),
        st.sampled_from(EDGE_TIMES), st.sampled_from(WEIRD_TEXT), st.text(max_size=40),
        st.builds(deep_json, st.sampled_from((5, 33, 150))),
        st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
    )


def _resolve(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    return _resolve(defs[ref.rsplit("/", 1)[-1]], defs) if ref else schema


def shaped(schema: dict[str, Any], defs: dict[str, Any], known: Sequence[str]) -> st.SearchStrategy[Any]:
    """A value of roughly the schema's shape, edge cases included (may still be out of range)."""
    schema = _resolve(schema, defs)
    if "anyOf" in schema:
        return st.one_of([shaped(s, defs, known) for s in schema["anyOf"]])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema.get("type")
    if kind == "null":
        return st.none()
    if kind == "boolean":
        return st.booleans()
    if kind == "integer":
        low, high = schema.get("minimum"), schema.get("maximum")
        return st.one_of(st.integers(low, high), st.sampled_from(EDGE_INTS))
    if kind == "number":
        return st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.sampled_from(EDGE_FLOATS),
                         st.floats(0, 1))
    if kind == "array":
        return st.lists(shaped(schema.get("items", {}), defs, known), max_size=4)
    if kind == "object":
        if "properties" in schema:
            return arguments(schema, defs, known)
        return json_values()
    if schema.get("format") == "date-time":
        edges = st.sampled_from(EDGE_TIMES)
        return st.one_of(edges, edges, st.datetimes().map(lambda d: d.isoformat()))
    low, high = schema.get("minLength", 1), min(schema.get("maxLength", 60), 60)
    plain = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=low, max_size=max(low, high))
    strings = [plain, plain, st.sampled_from(WEIRD_TEXT)]
    if known:
        strings.append(st.sampled_from(list(known)))
        strings.append(st.sampled_from([k[:8] for k in known]))
    return st.one_of(strings)


def json_values() -> st.SearchStrategy[dict[str, Any]]:
    scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False),
                        st.text(max_size=20), st.sampled_from(WEIRD_TEXT[:12]), st.sampled_from(EDGE_INTS))
    nested = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                         st.dictionaries(st.text(max_size=8), inner, max_size=3)),
                          max_leaves=10)
    return st.one_of(st.dictionaries(st.text(max_size=8), nested, max_size=4),
                     st.builds(lambda d: {"deep": deep_json(d)}, st.sampled_from((20, 40, 150))))


@st.composite
def arguments(draw: st.DrawFn, schema: dict[str, Any], defs: dict[str, Any] | None = None,
              known: Sequence[str] = ()) -> dict[str, Any]:
    """An arguments object: required properties always, optional ones sometimes, every value shaped by its
    schema; then one value (sometimes two) made hostile, now and then an unknown property added. Keeping the
    rest well-formed lets the hostile value travel past validation of the others, into handlers and stores."""
    defs = schema.get("$defs", {}) if defs is None else defs
    required = set(schema.get("required", []))
    props = schema.get("properties", {})
    args: dict[str, Any] = draw(st.fixed_dictionaries(
        {name: shaped(p, defs, known) for name, p in props.items() if name in required},
        optional={name: shaped(p, defs, known) for name, p in props.items() if name not in required}))
    names = sorted(props)
    for _ in range(draw(st.sampled_from((0, 1, 1, 1, 2)))):
        if names:
            args[draw(st.sampled_from(names))] = draw(hostile())
    if draw(st.integers(0, 9)) == 0:
        args[draw(st.sampled_from(["colour", "__proto__", "\x00", "id "]))] = draw(hostile())
    return args
