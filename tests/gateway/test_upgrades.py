"""Renamed settings, tools and arguments keep working with a warning naming the new name.

m3 has renamed no setting, tool or argument yet (the shipped tables are empty, apart from the admin commands
``config set-secret`` → ``secret set``, tested in test_secret_commands.py), so these tests inject a
**test-only** rename table through the public API: ``Registry(..., renames=Renames(...))`` and
``load_config(..., renamed=...)``. The old names below (``memory_recall``, ``limit``, ``search.default_k``)
are made up for the test and are not part of m3.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from m3.actors.system import ActorSystem
from m3.config import Config, load_config
from m3.errors import M3Error
from m3.gateway.cli import build_parser, tool_arguments
from m3.gateway.registry import Registry
from m3.gateway.service import Service
from m3.gateway.tools import HANDLERS
from m3.protocols.renames import RENAMES, Renames
from m3.protocols.tools import ALL_TOOLS
from tests.helpers import call

TEST_ONLY = Renames(tools={"memory_recall": "memory_search"}, args={"memory_search": {"limit": "k"}})


@pytest.fixture
def renamed_service(config: Config, system: ActorSystem) -> Service:
    return Service(config, system, Registry(ALL_TOOLS, HANDLERS, renames=TEST_ONLY))


def test_an_old_tool_and_argument_name_answer_as_the_new_ones_with_a_warning(
        renamed_service: Service, caplog: pytest.LogCaptureFixture) -> None:
    call(renamed_service, "memory_write", content="The standup is at nine thirty.")
    call(renamed_service, "memory_write", content="Lunch is at noon.")
    with caplog.at_level(logging.WARNING, logger="m3.gateway.registry"):
        old = call(renamed_service, "memory_recall", query="standup time", limit=1)
    new = call(renamed_service, "memory_search", query="standup time", k=1)
    assert [i["id"] for i in old["items"]] == [i["id"] for i in new["items"]]
    assert old["count"] == 1
    warned = " ".join(r.getMessage() for r in caplog.records)
    assert "renamed memory_search" in warned and "argument limit was renamed k" in warned
    with pytest.raises(M3Error) as both:
        call(renamed_service, "memory_search", query="x", k=1, limit=2)
    assert both.value.code == "invalid_argument"


def test_the_cli_parses_the_old_names_into_the_new_tool_and_arguments() -> None:
    registry = Registry(ALL_TOOLS, HANDLERS, renames=TEST_ONLY)
    ns = build_parser(registry).parse_args(["memory", "memory_recall", "--query", "x", "--limit", "3"])
    assert ns.m3_tool["name"] == "memory_search"  # the command line's tool entry (the manifest's)
    search = registry.get("memory_search")
    assert registry.upgrade_args(search, tool_arguments(ns.m3_tool, ns)) == {"query": "x", "k": "3"}


@pytest.mark.parametrize("bad", [Renames(tools={"memory_recall": "no_such_tool"}),
                                 Renames(tools={"memory_get": "memory_search"}),
                                 Renames(args={"memory_search": {"limit": "no_such_arg"}}),
                                 Renames(args={"memory_search": {"query": "k"}})])
def test_a_rename_table_that_points_nowhere_is_refused(bad: Renames) -> None:
    with pytest.raises(ValueError, match="rename"):
        Registry(ALL_TOOLS, HANDLERS, renames=bad)


def test_the_shipped_table_is_valid_and_listed() -> None:
    Registry(ALL_TOOLS, HANDLERS, renames=RENAMES)
    assert TEST_ONLY.rows() == [{"kind": "tool", "old": "memory_recall", "new": "memory_search"},
                                {"kind": "argument", "tool": "memory_search", "old": "limit", "new": "k"}]


def _write_config(home: Path, text: str) -> None:
    (home / "config").mkdir(parents=True)
    (home / "config" / "m3_config.toml").write_text(text)


def test_an_old_setting_name_in_the_file_or_environment_counts_under_the_new_one(
        m3_home: Path, caplog: pytest.LogCaptureFixture) -> None:
    _write_config(m3_home, "[search]\ndefault_k = 5\n")
    renamed = {"search.default_k": "search.k"}
    with caplog.at_level(logging.WARNING, logger="m3.config"):
        config = load_config({"M3_HOME": str(m3_home)}, renamed=renamed)
    assert (config["search.k"], config.origin("search.k")) == (5, "file")
    assert [(d["old"], d["new"], d["where"]) for d in config.deprecated] == [("search.default_k", "search.k", "file")]
    assert "use search.k" in caplog.text
    from_env = load_config({"M3_HOME": str(m3_home), "M3_SEARCH_DEFAULT_K": "7"}, renamed=renamed)
    assert (from_env["search.k"], from_env.origin("search.k")) == (7, "env")
    both = load_config({"M3_HOME": str(m3_home), "M3_SEARCH_DEFAULT_K": "7", "M3_SEARCH_K": "9"}, renamed=renamed)
    assert both["search.k"] == 9
    assert "ignored" in both.deprecated[-1]["message"]
    with pytest.raises(M3Error) as unknown:  # without the table the old name is an unknown setting, as before
        load_config({"M3_HOME": str(m3_home)})
    assert unknown.value.code == "config_error"


@pytest.mark.anyio
async def test_http_and_remote_mcp_answer_an_old_tool_name_and_list_only_the_new_one(renamed_service: Service) -> None:
    import httpx2

    from tests.gateway.test_mcp_http import client_for, serving, token_for

    token, _ = token_for(renamed_service, "agent-a")
    async with serving(renamed_service) as url:
        async with httpx2.AsyncClient(base_url=url.removesuffix("/mcp"), timeout=30) as http:
            headers = {"Authorization": f"Bearer {token}"}
            await http.post("/v1/tools/memory_write", json={"content": "Deploys happen on Tuesdays."}, headers=headers)
            answer = await http.post("/v1/tools/memory_recall", json={"query": "deploys", "limit": 1}, headers=headers)
            assert answer.status_code == 200, answer.text
            assert answer.json()["count"] == 1
        async with client_for(url, token) as client:
            listed = {t.name for t in (await client.list_tools()).tools}
            assert "memory_search" in listed and "memory_recall" not in listed
            result = await client.call_tool("memory_recall", {"query": "deploys", "limit": 1})
            assert not result.is_error
