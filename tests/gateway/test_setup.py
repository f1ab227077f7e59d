"""``m3 setup`` against fixture home folders holding each client's configuration in its real format."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from m3.errors import ClientConfigMalformed
from m3.gateway.cli import main
from m3.gateway.setup import jsonedit
from m3.gateway.setup.clients import BY_ID, CLIENTS, Places
from m3.gateway.setup.run import m3_command, run_setup
from tests.gateway.outcomes import Outcome
from tests.gateway.setup_fixtures import EXISTING


@pytest.fixture
def home(tmp_path: Path) -> Path:
    folder = tmp_path / "home"
    folder.mkdir()
    return folder


def places(home: Path, **env: str) -> Places:
    """The places of a machine whose PATH holds none of the clients' executables."""
    return Places.of({"PATH": str(home / "no-bin"), **env}, home=home, platform="linux")


def place(home: Path, client: str, text: str | None = None) -> Path:
    relative, fixture, _ = EXISTING[client]
    path = home / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(fixture if text is None else text, encoding="utf-8")
    return path


def servers_in(client: str, text: str) -> dict[str, Any]:
    """The servers a client reads from ``text`` (its file format, its container)."""
    spec = BY_ID[client]
    if spec.format == "toml":
        return dict(tomllib.loads(text)["mcp_servers"])
    data = json.loads(text) if spec.format == "json" else jsonedit.parse(text, comments=True).value
    for path in spec.containers:
        node: Any = data
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, dict) and not {"type", "command"} & set(node):
            return node
    raise AssertionError(f"no servers in {text}")


def expected_entry(client: str) -> dict[str, Any]:
    command, args = m3_command()
    env = {"M3_IDENTITY_AGENT_ID": client}
    if client == "opencode":
        return {"type": "local", "command": [command, *args], "environment": env}
    entry = {"command": command, "args": list(args), "env": env}
    return {"type": "stdio", **entry} if client in {"claude-code", "vscode"} else entry


def backups(path: Path) -> list[Path]:
    return sorted(path.parent.glob(path.name + ".m3-backup-*"))


@pytest.mark.parametrize("client", [c.id for c in CLIENTS])
def test_setup_adds_m3_beside_the_users_servers_and_remove_gives_the_file_back_byte_for_byte(
        home: Path, client: str) -> None:
    path = place(home, client)
    _, original, theirs = EXISTING[client]

    report = run_setup(places(home))
    row = next(r for r in report["clients"] if r["client"] == client)
    assert (row["installed"], row["change"], row["written"]) == (True, "add", True)
    # Only this client is installed in this home (and VS Code, which holds Cline).
    assert report["changed"] == (2 if client == "cline" else 1)
    text = path.read_text(encoding="utf-8")
    servers = servers_in(client, text)
    assert set(servers) == theirs | {"m3"}
    assert servers["m3"] == expected_entry(client)
    assert [b.read_text(encoding="utf-8") for b in backups(path)] == [original]
    assert Path(row["backup"]) == backups(path)[0]
    if BY_ID[client].format == "jsonc":
        assert all(line in text for line in original.splitlines() if "//" in line or "/*" in line)

    again = run_setup(places(home))
    assert again["changed"] == 0
    assert again["message"] == "nothing to change: m3 is already set up in every client found"
    assert path.read_text(encoding="utf-8") == text and len(backups(path)) == 1

    removed = run_setup(places(home), remove=True)
    assert [r["change"] for r in removed["clients"] if r["client"] == client] == ["remove"]
    assert path.read_text(encoding="utf-8") == original
    assert run_setup(places(home), remove=True)["message"] == "nothing to change: no client has m3 set up"


@pytest.mark.parametrize("client", [c.id for c in CLIENTS])
def test_a_client_without_a_file_yet_gets_one_in_its_format(home: Path, client: str) -> None:
    spec = BY_ID[client]
    path = spec.file(places(home))
    spec.markers(places(home))[0].mkdir(parents=True)  # installed: its folder exists, its file does not

    run_setup(places(home))
    assert servers_in(client, path.read_text(encoding="utf-8")) == {"m3": expected_entry(client)}
    assert backups(path) == [] and path.stat().st_mode & 0o777 == 0o600


def test_a_dry_run_shows_the_diff_and_writes_nothing(home: Path) -> None:
    cursor = place(home, "cursor")
    (home / ".gemini").mkdir()
    report = run_setup(places(home), dry_run=True)

    assert report["dry_run"] is True and report["changed"] == 2
    rows = {r["client"]: r for r in report["clients"]}
    assert rows["cursor"]["written"] is False and rows["cursor"]["backup"] is None
    assert rows["cursor"]["diff"].startswith(f"--- {cursor} (now)\n+++ {cursor} (after m3 setup)\n")
    assert '+    "m3": {' in rows["cursor"]["diff"]
    assert rows["gemini-cli"]["diff"].startswith("--- /dev/null\n")
    assert cursor.read_text(encoding="utf-8") == EXISTING["cursor"][1] and backups(cursor) == []
    assert not (home / ".gemini" / "settings.json").exists()
    assert report["message"] == "would change 2 files (dry run: nothing written)"


@pytest.mark.parametrize(("client", "text"), [
    ("claude-code", '{"mcpServers": {"a": {"command": "x"},}}'),  # a trailing comma: Claude Code reads strict JSON
    ("claude-desktop", '// my servers\n{"mcpServers": {}}'),
    ("windsurf", '{"mcpServers": ['),
    ("vscode", '{"servers": "none"}'),
    ("opencode", '["not", "an", "object"]'),
    ("codex", '[mcp_servers.docs\ncommand = "npx"\n'),
    ("codex", 'mcp_servers = "none"\n'),
])
def test_a_malformed_file_is_a_coded_error_and_no_file_is_written(home: Path, client: str, text: str) -> None:
    good = place(home, "gemini-cli")
    bad = place(home, client, text)
    with pytest.raises(ClientConfigMalformed) as caught:
        run_setup(places(home))
    assert caught.value.details["file"] == str(bad)
    assert bad.read_text(encoding="utf-8") == text and backups(bad) == []
    assert good.read_text(encoding="utf-8") == EXISTING["gemini-cli"][1] and backups(good) == []


def test_m3s_entry_is_updated_when_it_points_elsewhere_and_other_entries_keep_their_place(home: Path) -> None:
    stale = '{\n  "mcpServers": {\n    "m3": {"command": "/old/m3"},\n    "other": {"command": "x"}\n  }\n}\n'
    path = place(home, "cursor", stale)
    report = run_setup(places(home))
    assert [r["change"] for r in report["clients"] if r["client"] == "cursor"] == ["update"]
    text = path.read_text(encoding="utf-8")
    assert list(json.loads(text)["mcpServers"]) == ["m3", "other"]
    assert json.loads(text)["mcpServers"]["m3"] == expected_entry("cursor")
    assert text.endswith('    "other": {"command": "x"}\n  }\n}\n')


def test_opencode_v2_files_keep_their_servers_under_mcp_servers(home: Path) -> None:
    v2 = ('{\n  "mcp": {\n    "servers": {\n      "my-server": {"type": "local", "command": ["npx", "x"]},\n'
          '    },\n  },\n}\n')
    path = place(home, "opencode", v2)
    run_setup(places(home))
    data = jsonedit.parse(path.read_text(encoding="utf-8"), comments=True).value
    assert set(data["mcp"]) == {"servers"} and set(data["mcp"]["servers"]) == {"my-server", "m3"}
    run_setup(places(home), remove=True)
    assert path.read_text(encoding="utf-8") == v2


def test_only_installed_clients_are_touched_unless_named(home: Path) -> None:
    report = run_setup(places(home))
    assert report["changed"] == 0 and {r["reason"] for r in report["clients"]} == {"not installed"}
    assert report["message"] == "no agent client found here; name one with --client to set it up anyway"
    assert not any(home.iterdir())

    named = run_setup(places(home), only=["windsurf"])
    assert [r["client"] for r in named["clients"]] == ["windsurf"]
    assert servers_in("windsurf", (home / EXISTING["windsurf"][0]).read_text()) == {"m3": expected_entry("windsurf")}


def test_a_client_on_path_counts_as_installed(home: Path) -> None:
    bin_dir = home / "no-bin"
    bin_dir.mkdir()
    (bin_dir / "codex").write_text("#!/bin/sh\n")
    (bin_dir / "codex").chmod(0o755)
    report = run_setup(places(home), dry_run=True)
    assert [r["client"] for r in report["clients"] if r["installed"]] == ["codex"]


def test_locations_follow_xdg_config_home_codex_home_and_macos(tmp_path: Path) -> None:
    home = tmp_path / "h"
    linux = Places.of({"XDG_CONFIG_HOME": str(tmp_path / "xdg"), "CODEX_HOME": str(tmp_path / "cx"),
                       "HOME": str(home)}, platform="linux")
    assert BY_ID["opencode"].file(linux) == tmp_path / "xdg/opencode/opencode.json"
    assert BY_ID["vscode"].file(linux) == tmp_path / "xdg/Code/User/mcp.json"
    assert BY_ID["codex"].file(linux) == tmp_path / "cx/config.toml"
    mac = Places.of({"HOME": str(home)}, platform="darwin")
    support = home / "Library/Application Support"
    assert BY_ID["claude-desktop"].file(mac) == support / "Claude/claude_desktop_config.json"
    assert BY_ID["cline"].file(mac) == (
        support / "Code/User/globalStorage/saoudrizwan.claude-dev/settings/cline_mcp_settings.json")
    assert BY_ID["windsurf"].file(mac) == home / ".codeium/windsurf/mcp_config.json"
    # --home stands for the home folder: variables pointing into the real one no longer apply.
    assert BY_ID["codex"].file(Places.of({"CODEX_HOME": "/elsewhere"}, home=home)) == home / ".codex/config.toml"
    (tmp_path / "xdg/opencode").mkdir(parents=True)
    (tmp_path / "xdg/opencode/opencode.jsonc").write_text("{}")
    assert BY_ID["opencode"].file(linux) == tmp_path / "xdg/opencode/opencode.jsonc"


def test_a_linked_file_is_written_through_the_link(home: Path, tmp_path: Path) -> None:
    dotfiles = tmp_path / "dotfiles" / "mcp.json"
    dotfiles.parent.mkdir()
    dotfiles.write_text(EXISTING["cursor"][1], encoding="utf-8")
    link = home / EXISTING["cursor"][0]
    link.parent.mkdir(parents=True)
    link.symlink_to(dotfiles)
    run_setup(places(home))
    assert link.is_symlink() and "m3" in servers_in("cursor", dotfiles.read_text(encoding="utf-8"))
    assert [b.read_text(encoding="utf-8") for b in backups(link)] == [EXISTING["cursor"][1]]


def test_a_relocated_m3_home_is_passed_to_the_clients(home: Path, tmp_path: Path) -> None:
    place(home, "cursor")
    run_setup(places(home, M3_HOME=str(tmp_path / "m3")))
    entry = servers_in("cursor", (home / EXISTING["cursor"][0]).read_text())["m3"]
    assert entry["env"] == {"M3_IDENTITY_AGENT_ID": "cursor", "M3_HOME": str(tmp_path / "m3")}


# --- the command line -----------------------------------------------------------------------------

@pytest.fixture
def setup_cli(m3_home: Path, home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
              isolated_logging: None) -> Any:
    monkeypatch.setenv("PATH", str(home / "no-bin"))

    def run(*argv: str) -> Outcome:
        capsys.readouterr()
        status = main(["setup", "--home", str(home), *argv])
        out, err = capsys.readouterr()
        return Outcome(status, out, err)
    return run


def test_m3_setup_prints_a_report_and_json_with_json(setup_cli: Any, home: Path) -> None:
    path = place(home, "claude-code")
    shown = setup_cli("--dry-run")
    assert shown.status == 0, shown.err
    assert "Claude Code: would add m3 - " + str(path) in shown.stdout and '+    "m3": {' in shown.stdout
    assert shown.stdout.endswith("Not found here: Codex CLI, Cursor, Cline (VS Code extension), Gemini CLI, OpenCode, "
                                 "Claude Desktop, VS Code, Windsurf\nwould change 1 file (dry run: nothing written)\n")

    done = setup_cli("--json", "--client", "claude-code")
    report = json.loads(done.stdout)
    assert report["changed"] == 1 and report["clients"][0]["backup"] is not None
    again = setup_cli()
    assert again.stdout.endswith("nothing to change: m3 is already set up in every client found\n")
    assert "Claude Code: m3 is already set up - " in again.stdout
    assert json.loads(setup_cli("--remove", "--json").stdout)["clients"][0]["change"] == "remove"
    assert path.read_text(encoding="utf-8") == EXISTING["claude-code"][1]


def test_m3_setup_errors_are_coded(setup_cli: Any, home: Path) -> None:
    place(home, "gemini-cli", '{"mcpServers": {"a": 1} "b": 2}')
    broken = setup_cli()
    assert broken.status == 1 and broken.stdout == ""
    error = json.loads(broken.stderr.splitlines()[-1])["error"]
    assert error["code"] == "client_config_malformed" and error["details"]["line"] == 1
    assert setup_cli("--client", "gemini").status == 2  # not a client name (gemini-cli is)
