"""Administrative CLI commands that are not tools (config, serving, the store, tokens).

Each is declared once here: its domain and name (``m3 <domain> <name>``), its
arguments and a runner returning the JSON document to print (or None when
the command prints nothing, like a server).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from m3.config import Config, set_in_file, setting

#: The flags and options of one ``ArgumentParser.add_argument`` call.
Arg = tuple[tuple[str, ...], dict[str, Any]]


def arg(*flags: str, **options: Any) -> Arg:
    return flags, options


@dataclass(frozen=True)
class AdminCommand:
    domain: str
    name: str
    help: str
    run: Callable[[Config, argparse.Namespace], Any]
    args: tuple[Arg, ...] = ()
    #: A top-level spelling, ``m3 <alias> …`` for ``m3 <domain> <name> …``.
    alias: str | None = None

    def configure(self, parser: argparse.ArgumentParser) -> None:
        for flags, options in self.args:
            parser.add_argument(*flags, **options)


def _config_show(config: Config, ns: argparse.Namespace) -> dict[str, Any]:
    shown = ("value", "origin", "env")
    settings = {r["key"]: {k: r[k] for k in shown} if ns.origin else r["value"] for r in config.rows()}
    return {"file": str(config.file), "home": str(config.home), "settings": settings}


def _config_set(config: Config, ns: argparse.Namespace) -> dict[str, Any]:
    value = set_in_file(config, ns.key, ns.value)
    s = setting(ns.key)
    from m3.gateway import secret_commands, store_commands

    shown = secret_commands.HIDDEN if s.secret else value
    result: dict[str, Any] = {"file": str(config.file), "key": ns.key, "value": shown}
    if config.origin(ns.key) == "env":
        result["warning"] = f"{s.env_var} is set in the environment and overrides the file"
    elif config.origin(ns.key) == "secret":
        result["warning"] = "the secrets vault (`m3 secret set`) overrides the file"
    plain_password = store_commands.password_warning(s.key, str(value))
    if plain_password:
        result["warning"] = "; ".join(w for w in (result.get("warning"), plain_password) if w)
    return result


def _mcp_serve(config: Config, ns: argparse.Namespace) -> None:
    from m3.gateway.engine.paths import engine_mode

    if engine_mode(config) == "engine":
        from m3.gateway.engine.relay import serve_stdio as relay_stdio

        relay_stdio(config)
        return
    from m3.gateway.mcp_server import serve_stdio

    serve_stdio(config)


def _embedder_serve(config: Config, ns: argparse.Namespace) -> None:
    from m3.gateway.embed_server import serve

    serve(config, ns.host, ns.port)


def _fetch_model(config: Config, ns: argparse.Namespace) -> dict[str, Any]:
    from m3.embed.factory import model_dir
    from m3.embed.fetch import fetch_model

    folder = Path(ns.dir).expanduser() if ns.dir else model_dir(config, "bge-m3")
    result = fetch_model(ns.model, folder, progress=sys.stderr)
    result["next"] = (f"m3 config set embed.backend bge-m3 && m3 config set embed.model {ns.model} "
                      "&& m3 embedder reembed")
    return result


def _reembed(config: Config, ns: argparse.Namespace) -> dict[str, Any]:
    from m3.gateway.reembed import reembed

    return reembed(config, progress=sys.stderr)


def _lazy(module: str, name: str) -> Callable[[Config, argparse.Namespace], Any]:
    """``<module>.<name>``, imported when the command runs: the command line loads without it."""
    def run(config: Config, ns: argparse.Namespace) -> Any:
        return getattr(importlib.import_module(module), name)(config, ns)

    return run


def _doctor(config: Config, ns: argparse.Namespace) -> Any:
    from m3.gateway.doctor import doctor

    return doctor(config, ns)


def _http_serve(config: Config, ns: argparse.Namespace) -> None:
    from m3.gateway.engine.paths import engine_mode

    host, port = ns.host or config["serve.host"], config["serve.port"] if ns.port is None else ns.port
    if engine_mode(config) == "engine":
        from m3.gateway.engine.proxy import serve_http as relay_http

        relay_http(config, host, port)
        return
    from m3.gateway.http_server import serve_http

    serve_http(config, host, port)


def _setup(config: Config, ns: argparse.Namespace) -> dict[str, Any] | None:
    import os

    from m3.gateway.setup.clients import Places
    from m3.gateway.setup.run import render_text, run_setup

    home = Path(ns.home).expanduser() if ns.home else None
    report = run_setup(Places.of(os.environ, home), remove=ns.remove, dry_run=ns.dry_run, only=ns.client or ())
    if ns.json:
        return report
    sys.stdout.write(render_text(report))
    return None


def _client_names() -> list[str]:
    from m3.gateway.setup.clients import CLIENTS

    return [c.id for c in CLIENTS]


_SECRET_KEY = (arg("key", help="A secret setting: store.url, embed.key, llm.key or dashboard.token."),)

ADMIN_COMMANDS: tuple[AdminCommand, ...] = (
    AdminCommand("config", "show", "Print every setting (with --origin: where it came from).", _config_show,
                 (arg("--origin", action="store_true", help="Also say where each value came from."),)),
    AdminCommand("config", "set", "Write one setting into m3_config.toml.", _config_set,
                 (arg("key", help="A setting such as search.k (see `m3 config show`)."),
                  arg("value", help="The new value; lists are comma-separated."))),
    AdminCommand("mcp", "serve", "Serve MCP on stdio (the default when m3 runs without arguments).", _mcp_serve),
    AdminCommand("embedder", "serve",
                 "Serve the configured embedding model to every m3 process over the OpenAI embeddings API "
                 "(POST /v1/embeddings, GET /v1/models, GET /health, GET /stats); runs until stopped.",
                 _embedder_serve,
                 (arg("--host", default="127.0.0.1", help="Address to listen on (default 127.0.0.1)."),
                  arg("--port", type=int, default=8082, help="Port to listen on (default 8082)."))),
    AdminCommand("embedder", "fetch-model",
                 "Download a model's files into the model folder, with progress on stderr (needs internet; "
                 "resumes an interrupted download).", _fetch_model,
                 (arg("model", choices=["bge-m3", "bge-m3-int8"],
                      help="bge-m3 (fp32, about 2.6 GB) or bge-m3-int8 (about 0.6 GB)."),
                  arg("--dir", default=None, help="Folder to fill (default: embed.model_dir or its default)."))),
    AdminCommand("embedder", "reembed",
                 "Give every memory a vector of the configured model, with progress on stderr; search keeps "
                 "the previous model until this completes, then switches. Resumable.", _reembed),
    AdminCommand("secret", "set", "Store a secret setting (store.url, embed.key, llm.key, dashboard.token, "
                 "sync.warehouse_url), read from stdin, encrypted in the secrets vault.",
                 _lazy("m3.gateway.secret_commands", "secret_set"),
                 _SECRET_KEY),
    AdminCommand("secret", "get", "Print a secret setting's value from the vault (for the local user only).",
                 _lazy("m3.gateway.secret_commands", "secret_get"), _SECRET_KEY),
    AdminCommand("secret", "list", "The secret settings, which are set in the vault, where its key is (never a "
                 "value).", _lazy("m3.gateway.secret_commands", "secret_list")),
    AdminCommand("secret", "delete", "Remove a secret setting from the vault.",
                 _lazy("m3.gateway.secret_commands", "secret_delete"),
                 _SECRET_KEY),
    AdminCommand("secret", "migrate", "Move a plaintext secrets.toml of earlier versions into the vault (m3 also "
                 "does it on first use).", _lazy("m3.gateway.secret_commands", "secret_migrate")),
    AdminCommand("governance", "export-zip",
                 "Write everything m3 holds about one agent or user (gdpr_export) as a zip of JSON files, one per "
                 "section, readable by its owner only.", _lazy("m3.gateway.governance_commands", "export_zip"),
                 (arg("--agent-id", default=None, help="The agent subject."),
                  arg("--user-id", default=None, help="The user subject."),
                  arg("--zip", required=True, metavar="FILE", help="The zip file to write."))),
    AdminCommand("store", "migrate", "Bring the store's schema to the newest revision.",
                 _lazy("m3.gateway.store_commands", "store_migrate")),
    AdminCommand("store", "status", "Backend, URL (password hidden), schema revision and counts of the store.",
                 _lazy("m3.gateway.store_commands", "store_status")),
    AdminCommand("store", "export", "Write the whole store (every version, vectors, chat, tasks …) to one JSON Lines "
                 "file, owner-only (admin_export; docs/admin.md).", _lazy("m3.gateway.store_commands", "store_export"),
                 (arg("--out", required=True, metavar="FILE", help="The file to write."),
                  arg("--overwrite", action="store_true", help="Replace FILE if it exists."))),
    AdminCommand("store", "import", "Load a file of `m3 store export` into this store, all or nothing; the store must "
                 "be empty unless --merge (admin_import).", _lazy("m3.gateway.store_commands", "store_import"),
                 (arg("--in", dest="source", required=True, metavar="FILE", help="The file to read."),
                  arg("--merge", action="store_true", help="Skip the rows already here, add the rest."))),
    AdminCommand("postgres", "start", "Start the embedded PostgreSQL (pgvector) under the engine root; "
                 "prints its store URL.", _lazy("m3.gateway.store_commands", "postgres_start"),
                 (arg("--port", type=int, default=5432, help="Names the Unix socket file (no TCP is opened)."),
                  arg("--configure", action="store_true", help="Also write the printed URL into store.url."))),
    AdminCommand("postgres", "stop", "Stop the embedded PostgreSQL.",
                 _lazy("m3.gateway.store_commands", "postgres_stop")),
    AdminCommand("postgres", "status", "Whether the embedded PostgreSQL runs, and its URL.",
                 _lazy("m3.gateway.store_commands", "postgres_status")),
    AdminCommand("mcp", "http", "Serve MCP over Streamable HTTP (/mcp) and every tool as POST /v1/tools/{name} "
                 "behind bearer tokens; prints {url, tools_url, pid} once listening.", _http_serve,
                 (arg("--host", default=None, help="Address to listen on (default serve.host, 127.0.0.1)."),
                  arg("--port", default=None, type=int, help="Port (default serve.port, 8080; 0 picks a free one).")),
                 alias="serve"),
    AdminCommand("system", "doctor", "Check the install, configuration, secrets, file modes, store, embedder and "
                 "disk; each finding is ok, warn or fail with a hint. Exit status 1 if any check fails.", _doctor,
                 (arg("--fix", action="store_true", help="Repair what is safe to: file modes, migrations, a plaintext "
                      "secrets file."),
                  arg("--json", action="store_true", help="Print the JSON report even on a terminal.")),
                 alias="doctor"),
    AdminCommand("wheelhouse", "build", "Put the wheels of m3 and every dependency for this platform into DIR, for "
                 "`pip install --no-index --find-links DIR m3-memory` on a machine without network.",
                 _lazy("m3.gateway.wheelhouse", "build"),
                 (arg("dir", help="The folder to fill (created if missing)."),
                  arg("--extras", default=None, help="Comma-separated extras to include: postgres, flagembedding."),
                  arg("--no-deps", action="store_true", help="Only m3's own wheel (to refresh m3 alone)."))),
    AdminCommand("token", "create", "Create a bearer token for an agent; prints {token, agent_id, id} (the token "
                 "only this once).", _lazy("m3.gateway.tokens", "create"),
                 (arg("--agent", required=True, help="The agent the token acts as (registered if new)."),
                  arg("--label", default=None, help="A note to tell tokens apart, e.g. the host it is for."))),
    AdminCommand("token", "list", "List tokens (ids, agents, labels, times; never the tokens).",
                 _lazy("m3.gateway.tokens", "list_tokens"),
                 (arg("--agent", default=None, help="Only this agent's tokens."),)),
    AdminCommand("token", "revoke", "Revoke a token by id, or every token of an agent with --agent.",
                 _lazy("m3.gateway.tokens", "revoke"),
                 (arg("id", nargs="?", default=None, help="The token id (from `m3 token list`)."),
                  arg("--agent", default=None, help="Revoke every token of this agent instead."))),
)
ADMIN_COMMANDS += (
    AdminCommand("engine", "start", "Start the store's engine (one process hosting the actors; front-ends start it "
                 "on first use anyway); prints its status.", _lazy("m3.gateway.engine.commands", "start")),
    AdminCommand("engine", "stop", "Stop the store's engine, after it finishes pending embeddings.",
                 _lazy("m3.gateway.engine.commands", "stop")),
    AdminCommand("engine", "status", "Whether the store's engine runs, with its pid, version, socket and log; "
                 "with --stats each actor's queue depth, counts and latency percentiles.",
                 _lazy("m3.gateway.engine.commands", "status"),
                 (arg("--stats", action="store_true", help="Also each actor's statistics."),)),
    AdminCommand("web", "dashboard", "Serve the dashboard (memories, search, agents, tasks, graph, conflicts, audit "
                 "and GDPR, health) on 127.0.0.1:8088, every action a tool call as agent dashboard.agent; prints "
                 "{url, agent, pid} once listening (docs/dashboard.md).",
                 _lazy("m3.gateway.dashboard.serve", "dashboard"),
                 (arg("--host", default=None, help="Address (default dashboard.host, 127.0.0.1); off loopback the "
                      "dashboard token is required."),
                  arg("--port", default=None, type=int,
                      help="Port (default dashboard.port, 8088; 0 picks a free one)."),
                  arg("--agent", default=None, help="Act as this agent (default dashboard.agent)."),
                  arg("--open", action="store_true", help="Open it in the web browser.")),
                 alias="dashboard"),
    AdminCommand("wiki", "generate", "Write the memories as a wiki: Markdown pages, an Obsidian vault or one "
                 "self-contained HTML file; only changed files are rewritten (docs/dashboard.md).",
                 _lazy("m3.gateway.wiki.generate", "generate_command"),
                 (arg("--format", choices=["markdown", "html", "obsidian"], default="markdown", help="What to write."),
                  arg("--out", required=True, metavar="DIR", help="The folder to write into (created if missing)."),
                  arg("--agent", default=None, help="Read as this agent (default dashboard.agent)."))),
    AdminCommand("clients", "setup", "Find the agent clients installed here (Claude Code, Codex, Cursor, Cline, Gemini "
                 "CLI, OpenCode, Claude Desktop, VS Code, Windsurf) and add m3's MCP server to each, as its own agent; "
                 "a backup of each file is kept beside it (docs/setup.md).", _setup,
                 (arg("--dry-run", action="store_true", help="Show the changes as a unified diff; write nothing."),
                  arg("--remove", action="store_true", help="Take m3's entry out again, leaving the rest as it was."),
                  arg("--client", action="append", choices=_client_names(), metavar="NAME",
                      help="Only this client (repeatable), set up even if not detected: " + ", ".join(_client_names())
                      + "."),
                  arg("--home", default=None, metavar="DIR", help="Look in DIR instead of the home folder."),
                  arg("--json", action="store_true", help="Print the report as one JSON document.")),
                 alias="setup"),
)
ALIASES: dict[str, AdminCommand] = {c.alias: c for c in ADMIN_COMMANDS if c.alias}

#: Renamed admin commands, old ``(domain, name)`` → new: the old spelling runs the new command and its answer
#: carries a ``warning`` naming the new one (docs/upgrading.md).
RENAMED_COMMANDS: dict[tuple[str, str], tuple[str, str]] = {
    ("config", "set-secret"): ("secret", "set"),  # the encrypted vault replaced the plaintext secrets file
    ("config", "unset-secret"): ("secret", "delete"),
}


def renamed_command_rows() -> list[dict[str, str]]:
    return [{"kind": "command", "old": f"m3 {' '.join(old)}", "new": f"m3 {' '.join(new)}"}
            for old, new in RENAMED_COMMANDS.items()]


def deprecation_note(old: tuple[str, str]) -> str:
    return f"`m3 {' '.join(old)}` was renamed: use `m3 {' '.join(RENAMED_COMMANDS[old])}`"
