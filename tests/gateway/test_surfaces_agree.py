"""The registry and every surface derived from it agree: CLI, m3_call, MCP and docs/tools.md.

A tool declared once must appear everywhere under the same name with the
same arguments; nothing may appear on a surface that the registry lacks.
"""

from __future__ import annotations

import argparse
import re

import pytest
import trio
from mcp import Client

from devtools import docs
from m3.errors import M3Error
from m3.gateway.cli import build_parser, flag_dest
from m3.gateway.commands import ADMIN_COMMANDS, RENAMED_COMMANDS
from m3.gateway.mcp_server import build_server, local_identity
from m3.gateway.registry import Tool, default_registry
from m3.gateway.service import CallContext, Service

REGISTRY = default_registry()
TOOLS = list(REGISTRY)
PARSER = build_parser(REGISTRY)


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The sub-parsers of ``parser`` by every name they answer to (aliases included)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def options(parser: argparse.ArgumentParser) -> dict[str, str]:
    """Every option string of ``parser`` and the argument it sets, without --help."""
    return {flag: action.dest for action in parser._actions for flag in action.option_strings
            if not isinstance(action, argparse._HelpAction)}


@pytest.mark.parametrize("tool", TOOLS, ids=lambda t: t.spec.name)
def test_every_tool_is_a_cli_command_by_full_and_short_name_with_exactly_its_arguments_as_flags(tool: Tool) -> None:
    commands = subcommands(subcommands(PARSER)[tool.spec.domain])
    command = commands[tool.spec.name]
    assert commands[tool.spec.short_name] is command
    fields = set(tool.spec.args.model_fields)
    # Each flag lands under its own name apart from the parser's (cli.flag_dest), so `--tool`/`--domain` cannot clash.
    expected = {f"--{f}": flag_dest(f) for f in fields} | {f"--{f.replace('_', '-')}": flag_dest(f) for f in fields}
    assert options(command) == expected | {"--json-file": "json_file"}


def test_the_cli_has_no_command_that_is_neither_a_tool_nor_an_admin_command() -> None:
    declared = {(t.spec.domain, name) for t in TOOLS
                for name in (t.spec.name, t.spec.short_name, t.spec.short_name.replace("_", "-"))}  # dashes, too
    declared |= {(a.domain, a.name) for a in ADMIN_COMMANDS} | set(RENAMED_COMMANDS)  # old spellings, kept
    offered = {(domain, name) for domain, parser in subcommands(PARSER).items() for name in subcommands(parser)}
    assert offered == declared


def test_every_tool_is_reachable_through_m3_call(service: Service) -> None:
    ctx = CallContext(agent_id="local")

    async def reach(name: str) -> str:
        """What m3_call with empty arguments says: the tool's own answer or its own complaint."""
        # notifications_wait's default is to wait 30 s for a notification nobody sends: only look.
        args = {"timeout": 0} if name == "notifications_wait" else {}
        try:
            result = await service.call("m3_call", {"tool": name, "args": args}, ctx)
        except M3Error as exc:
            assert exc.code != "unknown_tool", exc.message
            return exc.message
        return str(result["tool"])

    for tool in TOOLS:
        assert tool.spec.name in trio.run(reach, tool.spec.name)


@pytest.mark.anyio
async def test_after_loading_every_domain_mcp_lists_exactly_the_registry(service: Service) -> None:
    async with Client(build_server(service, local_identity(service.config)), mode="legacy") as client:
        for domain in REGISTRY.domains():
            assert not (await client.call_tool("tools_load_domain", {"domain": domain})).is_error
        listed = {t.name: t for t in (await client.list_tools()).tools}
    assert sorted(listed) == sorted(t.spec.name for t in TOOLS)
    for tool in TOOLS:
        advertised = listed[tool.spec.name]
        assert advertised.description == tool.spec.description
        assert advertised.input_schema == tool.input_schema
        assert advertised.output_schema == tool.output_schema
        assert advertised.annotations is not None
        assert advertised.annotations.read_only_hint is tool.spec.read_only
        assert advertised.annotations.destructive_hint is tool.spec.destructive


def test_docs_tools_md_documents_exactly_the_registry_tools_under_their_domains() -> None:
    text = (docs.DOCS_DIR / "tools.md").read_text(encoding="utf-8")
    documented: dict[str, str] = {}
    domain = ""
    for line in text.splitlines():
        if heading := re.fullmatch(r"## Domain `(\w+)`", line):
            domain = heading[1]
        elif heading := re.fullmatch(r"### `(\w+)`", line):
            documented[heading[1]] = domain
    assert documented == {t.spec.name: t.spec.domain for t in TOOLS}
