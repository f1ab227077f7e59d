"""The agent clients ``m3 setup`` knows: where each keeps its MCP servers, in which format, and how it
spells a stdio server. One row per client; the code that edits the files is shared by format family.

Each row names the public documentation its location and format were taken from (docs/setup.md lists
them too). Paths are for Linux and macOS, the platforms m3 runs on.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal


@dataclass(frozen=True)
class Launch:
    """How a client starts m3's stdio MCP server."""

    command: str
    args: tuple[str, ...]
    env: Mapping[str, str]


@dataclass(frozen=True)
class Places:
    """Where one run looks: the home folder, ``$XDG_CONFIG_HOME``, the platform and the environment."""

    home: Path
    env: Mapping[str, str]
    platform: str

    @classmethod
    def of(cls, env: Mapping[str, str], home: Path | None = None, platform: str | None = None) -> Places:
        """The places of ``env``; ``home`` (``m3 setup --home``) stands for ``$HOME`` and drops the variables that
        point into the real home (``XDG_CONFIG_HOME``, ``CODEX_HOME``)."""
        if home is not None:
            env = {k: v for k, v in env.items() if k not in {"HOME", "XDG_CONFIG_HOME", "CODEX_HOME"}}
        found = home or Path(env.get("HOME") or Path.home())
        return cls(found.expanduser().absolute(), dict(env), platform or sys.platform)

    @property
    def config_home(self) -> Path:
        """``$XDG_CONFIG_HOME``, else ``~/.config`` (also on macOS, for the tools that follow XDG there)."""
        return Path(self.env["XDG_CONFIG_HOME"]) if self.env.get("XDG_CONFIG_HOME") else self.home / ".config"

    @property
    def app_data(self) -> Path:
        """Where desktop applications keep their settings: ``~/Library/Application Support`` on macOS."""
        return self.home / "Library" / "Application Support" if self.platform == "darwin" else self.config_home

    def on_path(self, name: str) -> bool:
        return shutil.which(name, path=self.env.get("PATH", os.defpath)) is not None


def standard(launch: Launch) -> dict[str, Any]:
    """``{"command", "args", "env"}``, the shape most clients share under ``mcpServers``."""
    return {"command": launch.command, "args": list(launch.args), "env": dict(launch.env)}


def typed_stdio(launch: Launch) -> dict[str, Any]:
    """The standard shape with ``"type": "stdio"`` first (Claude Code, VS Code)."""
    return {"type": "stdio", **standard(launch)}


def opencode(launch: Launch) -> dict[str, Any]:
    """OpenCode: ``type`` local, the command and its arguments in one array, variables under ``environment``."""
    return {"type": "local", "command": [launch.command, *launch.args], "environment": dict(launch.env)}


@dataclass(frozen=True)
class Client:
    id: str
    label: str
    doc: str
    #: json (strict: the client reads it with a JSON parser), jsonc (comments and trailing commas) or toml.
    format: Literal["json", "jsonc", "toml"]
    file: Callable[[Places], Path]
    #: Folders whose presence means the client is installed (besides an executable on PATH).
    markers: Callable[[Places], tuple[Path, ...]]
    shape: Callable[[Launch], dict[str, Any]] = standard
    executables: tuple[str, ...] = ()
    #: Key paths of the object holding the servers, the preferred first: the first that exists is used,
    #: else the last is created.
    containers: tuple[tuple[str, ...], ...] = (("mcpServers",),)
    #: Top-level members of a file m3 creates.
    skeleton: Mapping[str, Any] = field(default_factory=dict)

    def installed(self, places: Places) -> bool:
        return self.file(places).exists() or any(p.is_dir() for p in self.markers(places)) or any(
            places.on_path(name) for name in self.executables)


def _vscode_user(places: Places) -> Path:
    return places.app_data / "Code" / "User"


def _cline_dir(places: Places) -> Path:
    return _vscode_user(places) / "globalStorage" / "saoudrizwan.claude-dev"


def _codex_home(places: Places) -> Path:
    return Path(places.env["CODEX_HOME"]) if places.env.get("CODEX_HOME") else places.home / ".codex"


def _opencode_file(places: Places) -> Path:
    folder = places.config_home / "opencode"
    jsonc = folder / "opencode.jsonc"
    return jsonc if jsonc.exists() else folder / "opencode.json"


CLIENTS: tuple[Client, ...] = (
    Client("claude-code", "Claude Code", "https://code.claude.com/docs/en/mcp", "json",
           lambda p: p.home / ".claude.json", lambda p: (p.home / ".claude",), typed_stdio, ("claude",)),
    Client("codex", "Codex CLI", "https://github.com/openai/codex/blob/main/docs/config.md", "toml",
           lambda p: _codex_home(p) / "config.toml", lambda p: (_codex_home(p),), standard, ("codex",),
           (("mcp_servers",),)),
    Client("cursor", "Cursor", "https://cursor.com/docs/mcp", "jsonc",
           lambda p: p.home / ".cursor" / "mcp.json", lambda p: (p.home / ".cursor",), standard, ("cursor",)),
    Client("cline", "Cline (VS Code extension)", "https://docs.cline.bot/mcp/configuring-mcp-servers", "json",
           lambda p: _cline_dir(p) / "settings" / "cline_mcp_settings.json", lambda p: (_cline_dir(p),)),
    Client("gemini-cli", "Gemini CLI", "https://geminicli.com/docs/tools/mcp-server/", "jsonc",
           lambda p: p.home / ".gemini" / "settings.json", lambda p: (p.home / ".gemini",), standard, ("gemini",)),
    Client("opencode", "OpenCode", "https://opencode.ai/docs/mcp-servers/", "jsonc", _opencode_file,
           lambda p: (p.config_home / "opencode",), opencode, ("opencode",), (("mcp", "servers"), ("mcp",)),
           {"$schema": "https://opencode.ai/config.json"}),
    Client("claude-desktop", "Claude Desktop", "https://modelcontextprotocol.io/docs/develop/connect-local-servers",
           "json",
           lambda p: p.app_data / "Claude" / "claude_desktop_config.json", lambda p: (p.app_data / "Claude",)),
    Client("vscode", "VS Code", "https://code.visualstudio.com/docs/copilot/reference/mcp-configuration", "jsonc",
           lambda p: _vscode_user(p) / "mcp.json", lambda p: (_vscode_user(p),), typed_stdio, ("code",),
           (("servers",),)),
    Client("windsurf", "Windsurf", "https://docs.windsurf.com/windsurf/cascade/mcp", "json",
           lambda p: p.home / ".codeium" / "windsurf" / "mcp_config.json",
           lambda p: (p.home / ".codeium" / "windsurf",), standard, ("windsurf",)),
)
BY_ID: dict[str, Client] = {c.id: c for c in CLIENTS}
