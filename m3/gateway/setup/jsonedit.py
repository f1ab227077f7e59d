"""Edit one member of a JSON (or JSON-with-comments) file in place, leaving every other byte as it was.

The file is parsed into nodes that remember where they stand in the text; a change replaces, inserts or
deletes the text of one member only, so the user's formatting, key order and (where the client allows
them) comments and trailing commas survive. Inserting a member and then removing it gives back the
original text.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

_SPACE = re.compile(r"[ \t\r\n\ufeff]+")
_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")
_LITERALS = {"true": True, "false": False, "null": None}


class JsonSyntaxError(ValueError):
    """The text is not JSON (or not the JSON flavour the client reads); ``line`` and ``column`` count from 1."""

    def __init__(self, message: str, text: str, pos: int):
        self.line = text.count("\n", 0, pos) + 1
        self.column = pos - (text.rfind("\n", 0, pos) + 1) + 1
        super().__init__(f"{message} at line {self.line}, column {self.column}")


@dataclass
class Node:
    """A JSON value at ``text[start:end]``; an object also keeps its members and the offset of its ``}``."""

    start: int
    end: int
    value: Any
    members: list[Member] | None = None

    def member(self, key: str) -> Member | None:
        return next((m for m in self.members or () if m.key == key), None)


@dataclass
class Member:
    key: str
    key_start: int
    node: Node = field(repr=False)


class _Parser:
    def __init__(self, text: str, comments: bool):
        self.text, self.comments, self.pos = text, comments, 0

    def fail(self, message: str) -> JsonSyntaxError:
        return JsonSyntaxError(message, self.text, self.pos)

    def skip(self) -> None:
        """Skip whitespace and, in JSON with comments, ``//`` and ``/* */`` comments."""
        text = self.text
        while self.pos < len(text):
            char = text[self.pos]
            if char in " \t\r\n\ufeff":
                self.pos = _SPACE.match(text, self.pos).end()  # type: ignore[union-attr]  # char matched
            elif char == "/" and self.comments and text.startswith("//", self.pos):
                newline = text.find("\n", self.pos)
                self.pos = len(text) if newline < 0 else newline
            elif char == "/" and self.comments and text.startswith("/*", self.pos):
                close = text.find("*/", self.pos + 2)
                if close < 0:
                    raise self.fail("unterminated comment")
                self.pos = close + 2
            elif char == "/":
                raise self.fail("comments are not allowed in this file")
            else:
                return

    def value(self) -> Node:
        self.skip()
        if self.pos >= len(self.text):
            raise self.fail("unexpected end of file")
        char = self.text[self.pos]
        if char == "{":
            return self.object()
        if char == "[":
            return self.array()
        if char == '"':
            start = self.pos
            return Node(start, self.string_end(), self.decode(start))
        for word, literal in _LITERALS.items():
            if self.text.startswith(word, self.pos):
                start, self.pos = self.pos, self.pos + len(word)
                return Node(start, self.pos, literal)
        match = _NUMBER.match(self.text, self.pos)
        if match is None:
            raise self.fail(f"unexpected character {char!r}")
        self.pos = match.end()
        return Node(match.start(), self.pos, json.loads(match.group()))

    def string_end(self) -> int:
        match = _STRING.match(self.text, self.pos)
        if match is None:
            raise self.fail("unterminated string")
        self.pos = match.end()
        return self.pos

    def decode(self, start: int) -> Any:
        """The string token ``text[start:pos]`` as Python (escapes resolved; control characters refused)."""
        try:
            return json.loads(self.text[start:self.pos])
        except json.JSONDecodeError as exc:
            raise JsonSyntaxError(f"bad string: {exc.msg.removesuffix(' at')}", self.text, start + exc.pos) from None

    def items(self, close: str, item: Any) -> int:
        """Parse ``item()`` separated by commas up to ``close``; returns the offset of ``close``."""
        self.pos += 1
        self.skip()
        while self.pos < len(self.text) and self.text[self.pos] != close:
            item()
            self.skip()
            if self.text.startswith(",", self.pos):
                self.pos += 1
                self.skip()
                if self.text.startswith(close, self.pos) and not self.comments:
                    raise self.fail("trailing comma")
            elif not self.text.startswith(close, self.pos):
                raise self.fail(f"expected ',' or {close!r}")
        if self.pos >= len(self.text):
            raise self.fail("unexpected end of file")
        self.pos += 1
        return self.pos - 1

    def object(self) -> Node:
        node = Node(self.pos, 0, {}, [])

        def member() -> None:
            if not self.text.startswith('"', self.pos):
                raise self.fail("expected a key in double quotes")
            key_start = self.pos
            self.string_end()
            key = self.decode(key_start)
            self.skip()
            if not self.text.startswith(":", self.pos):
                raise self.fail("expected ':'")
            self.pos += 1
            child = self.value()
            assert node.members is not None
            node.members.append(Member(key, key_start, child))
            node.value[key] = child.value

        self.items("}", member)
        node.end = self.pos
        return node

    def array(self) -> Node:
        node = Node(self.pos, 0, [])
        self.items("]", lambda: node.value.append(self.value().value))
        node.end = self.pos
        return node


def parse(text: str, *, comments: bool) -> Node:
    """The root node of ``text``; raises :class:`JsonSyntaxError`."""
    parser = _Parser(text, comments)
    try:
        root = parser.value()
    except RecursionError:
        raise JsonSyntaxError("nested too deeply", text, parser.pos) from None
    parser.skip()
    if parser.pos != len(text):
        raise parser.fail("unexpected text after the end")
    return root


# --- edits ----------------------------------------------------------------------------------------

def _line_indent(text: str, pos: int) -> str | None:
    """The whitespace before ``pos`` on its line, or None when something else precedes it there."""
    prefix = text[text.rfind("\n", 0, pos) + 1:pos]
    return prefix if not prefix.strip() else None


def _leading(text: str, pos: int) -> str:
    """The whitespace that starts the line holding ``pos``."""
    start = text.rfind("\n", 0, pos) + 1
    match = re.match(r"[ \t]*", text[start:pos])
    return match.group() if match else ""


def indent_unit(text: str, root: Node) -> str:
    """The file's indentation step: that of the root object's first member, else two spaces."""
    found = _line_indent(text, root.members[0].key_start) if root.members else None
    return found or "  "


def newline(text: str) -> str:
    """The file's line ending: CRLF if it has one, else LF."""
    return "\r\n" if "\r\n" in text else "\n"


def _render(key: str, value: Any, indent: str | None, unit: str, nl: str = "\n") -> str:
    """``"key": value`` for a new member; ``indent`` None means the object is written on one line."""
    if indent is None:
        return f"{json.dumps(key)}: {json.dumps(value, ensure_ascii=False)}"
    body = json.dumps(value, ensure_ascii=False, indent=unit).replace("\n", nl + indent)
    return f"{json.dumps(key)}: {body}"


def set_member(text: str, obj: Node, key: str, value: Any, unit: str) -> str:
    """``text`` with ``obj[key]`` set to ``value``: its value replaced, or a member added at the end."""
    assert obj.members is not None
    nl = newline(text)
    existing = obj.member(key)
    if existing is not None:
        indent = _line_indent(text, existing.key_start)
        rendered = _render(key, value, indent, unit, nl).split(": ", 1)[1]
        return text[:existing.node.start] + rendered + text[existing.node.end:]
    if not obj.members:
        outer = _leading(text, obj.start)
        added = f"{nl}{outer}{unit}{_render(key, value, outer + unit, unit, nl)}{nl}{outer}"
        return text[:obj.start + 1] + added + text[obj.start + 1:]  # before whatever the braces held
    last = obj.members[-1]
    indent = _line_indent(text, last.key_start)
    rendered = _render(key, value, indent, unit, nl)
    after_last = last.node.end
    trailing = re.match(r"[ \t]*,", text[after_last:])  # JSON with comments may end with a comma
    if trailing:
        at = after_last + trailing.end()
        return text[:at] + (nl + indent if indent is not None else " ") + rendered + "," + text[at:]
    separator = "," + nl + indent if indent is not None else ", "
    return text[:after_last] + separator + rendered + text[after_last:]


def delete_member(text: str, obj: Node, key: str) -> str:
    """``text`` without the member ``key`` of ``obj`` (the inverse of :func:`set_member` adding it)."""
    assert obj.members is not None
    index = next(i for i, m in enumerate(obj.members) if m.key == key)
    member = obj.members[index]
    if index + 1 < len(obj.members):
        return text[:member.key_start] + text[obj.members[index + 1].key_start:]
    if index > 0:
        return text[:obj.members[index - 1].node.end] + text[member.node.end:]
    rest = text[member.node.end:]
    rest = rest[rest.index(",") + 1:] if re.match(r"[ \t]*,", rest) else rest  # JSON with comments: a trailing comma
    between = text[obj.start + 1:member.key_start]
    if between.strip():  # comments before the member stay; so does the line they are on
        line_start = text.rfind("\n", 0, member.key_start)
        cut = line_start if _line_indent(text, member.key_start) is not None and line_start > obj.start else (
            member.key_start)
        return text[:cut] + rest
    closing = newline(text) + _leading(text, obj.start)
    return text[:obj.start + 1] + (rest[len(closing):] if rest.startswith(closing) else rest)
