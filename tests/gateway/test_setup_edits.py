"""The file edits of ``m3 setup`` on any JSON a user may have: generated documents in any indentation.

The span parser must read what ``json`` reads (and refuse what it refuses), and adding m3's entry then
removing it must give back the exact text.
"""

from __future__ import annotations

import json
import tomllib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from m3.errors import ClientConfigChanged
from m3.gateway.setup import edit, jsonedit
from m3.gateway.setup.clients import BY_ID, Places
from m3.gateway.setup.run import apply, plan
from tests.fuzzing import EXAMPLES

PROPERTY = settings(max_examples=EXAMPLES * 2, deadline=None, database=None)
CURSOR = BY_ID["cursor"]
ENTRY = {"command": "/opt/m3/bin/m3", "args": [], "env": {"M3_IDENTITY_AGENT_ID": "cursor"}}

scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False),
                    st.text(max_size=12))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                        st.dictionaries(st.text(max_size=6), inner, max_size=3)),
                      max_leaves=12)
indents = st.sampled_from([None, 0, 1, 2, 4, "\t"])


@st.composite
def documents(draw: Any) -> tuple[dict[str, Any], str]:
    """A settings file: the user's keys, a ``mcpServers`` object with at least one server, any layout."""
    doc = draw(st.dictionaries(st.text(max_size=8).filter(lambda k: k != "mcpServers"), values, max_size=4))
    servers = draw(st.dictionaries(st.text(max_size=8).filter(lambda k: k != "m3"), values, min_size=1,
                                   max_size=3))
    items = [*doc.items()]
    items.insert(draw(st.integers(0, len(items))), ("mcpServers", servers))
    document = dict(items)
    return document, json.dumps(document, indent=draw(indents), ensure_ascii=draw(st.booleans()))


@PROPERTY
@given(documents())
def test_adding_m3_changes_only_its_entry_and_removing_it_restores_the_text(case: tuple[dict[str, Any], str]) -> None:
    document, text = case
    assert jsonedit.parse(text, comments=False).value == document

    added = edit.with_entry(CURSOR, text, ENTRY, "f")
    assert json.loads(added) == {**document, "mcpServers": {**document["mcpServers"], "m3": ENTRY}}
    assert edit.current_entry(CURSOR, added, "f") == ENTRY
    assert edit.without_entry(CURSOR, added, "f") == text


@PROPERTY
@given(st.text(alphabet='{}[]":,0123456789.eE+-tfalsenu \n\\/*x', max_size=30))
def test_the_parser_refuses_exactly_what_json_refuses(text: str) -> None:
    try:
        expected = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        with pytest.raises(jsonedit.JsonSyntaxError):
            jsonedit.parse(text, comments=False)
    else:
        assert jsonedit.parse(text, comments=False).value == expected


def test_crlf_files_keep_their_line_ends(tmp_path: Path) -> None:
    text = '{\r\n  "mcpServers": {\r\n    "a": {"command": "x"}\r\n  }\r\n}\r\n'
    added = edit.with_entry(CURSOR, text, ENTRY, "f")
    assert "\n" not in added.replace("\r\n", "")
    assert edit.without_entry(CURSOR, added, "f") == text


def test_a_file_the_client_rewrote_meanwhile_is_not_overwritten(tmp_path: Path) -> None:
    places = Places.of({"PATH": ""}, home=tmp_path)
    path = CURSOR.file(places)
    path.parent.mkdir()
    path.write_text('{"mcpServers": {}}', encoding="utf-8")
    change = plan(CURSOR, places, remove=False, named=False)
    path.write_text('{"mcpServers": {}, "saved": "by Cursor"}', encoding="utf-8")
    with pytest.raises(ClientConfigChanged):
        apply(change, datetime.now(UTC))
    assert path.read_text(encoding="utf-8") == '{"mcpServers": {}, "saved": "by Cursor"}'


CODEX = BY_ID["codex"]
CODEX_ENTRY = {"command": "/opt/m3/bin/m3", "args": [], "env": {"M3_IDENTITY_AGENT_ID": "codex"}}


@pytest.mark.parametrize("text", [
    "",
    'model = "o3"\n',
    'model = "o3"\n\n[mcp_servers.docs]\ncommand = "npx"  # keep me\n\n[profiles.fast]\nmodel = "o4-mini"\n',
    'mcp_servers.docs.command = "npx"\n',
    '[mcp_servers]\ndocs = { command = "x" }\n',
    'mcp_servers = { docs = { command = "npx" } }\n',
])
def test_codex_tables_in_every_toml_spelling_get_m3_and_lose_it_again(text: str) -> None:
    added = edit.with_entry(CODEX, text, CODEX_ENTRY, "f")
    before, after = tomllib.loads(text), tomllib.loads(added)
    assert after["mcp_servers"].pop("m3") == CODEX_ENTRY
    assert after == before | ({"mcp_servers": {}} if "mcp_servers" not in before else {})
    removed = edit.without_entry(CODEX, added, "f")
    assert tomllib.loads(removed) == before
    if "{ docs" not in text:  # an inline table is rewritten with its spacing changed
        assert removed == text


def test_codex_entry_pointing_elsewhere_is_replaced() -> None:
    stale = '[mcp_servers.m3]\ncommand = "/old/m3"\n\n[other]\nx = 1\n'
    updated = edit.with_entry(CODEX, stale, CODEX_ENTRY, "f")
    assert tomllib.loads(updated) == {"mcp_servers": {"m3": CODEX_ENTRY}, "other": {"x": 1}}
