"""The command line: ``m3 <domain> <tool> --arg value …`` for every tool, plus admin commands.

Contract (docs/cli.md): stdout carries exactly one JSON document; logs and
progress go to stderr; an error is ``{"error": {"code", "message", "hint"}}``
on stderr with exit status 1, or 2 for a usage error. ``--json-file -``
reads the arguments as a JSON object from stdin. Bare ``m3`` serves MCP on
stdio.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from m3 import __version__
from m3.config import Config, load_config
from m3.errors import FieldTooLarge, Interrupted, InvalidArgument, M3Error
from m3.gateway.commands import ADMIN_COMMANDS, ALIASES, RENAMED_COMMANDS, AdminCommand, deprecation_note
from m3.gateway.engine import manifest
from m3.gateway.engine.paths import engine_mode

if TYPE_CHECKING:
    from m3.gateway.registry import Registry

#: A tool as the command line knows it: an entry of the tool manifest (m3.gateway.engine.manifest).
ToolEntry = dict[str, Any]

EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report it (SIGTERM: 143)


class UsageError(Exception):
    """A command line that does not parse; exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}")


def emit(document: Any) -> None:
    indent = 2 if sys.stdout.isatty() else None
    sys.stdout.write(json.dumps(document, ensure_ascii=False, indent=indent, default=str) + "\n")
    sys.stdout.flush()


def emit_error(body: dict[str, Any]) -> None:
    sys.stderr.write(json.dumps({"error": body}, ensure_ascii=False) + "\n")
    sys.stderr.flush()


# --- parser construction ------------------------------------------------------------------------

def build_parser(source: Registry | list[ToolEntry], only: str | None = None) -> argparse.ArgumentParser:
    """The parser of every tool (from the registry, or the manifest's entries) and admin command.

    With ``only`` (the domain a command line names), the other domains are listed without their commands:
    a one-shot command does not pay for building ninety sub-parsers.
    """
    entries = manifest.build(source, schemas=False)["tools"] if not isinstance(source, list) else source
    parser = _Parser(prog="m3", description="m3: memory and coordination for AI agents. "
                     "Bare `m3` serves MCP on stdio.")
    parser.add_argument("--version", action="version", version=f"m3 {__version__}")
    # Not `domain`/`command`: a tool argument of that name (m3_index --domain) would overwrite them.
    commands = parser.add_subparsers(dest="m3_domain", metavar="<domain>", parser_class=_Parser)
    domains: dict[str, list[ToolEntry]] = {}
    for entry in entries:
        domains.setdefault(entry["domain"], []).append(entry)
    for name in sorted(set(domains) | {c.domain for c in ADMIN_COMMANDS}):
        tools = domains.get(name, [])
        sub = commands.add_parser(name, help=f"{len(tools)} tools" if tools else "administration")
        actions = sub.add_subparsers(dest="m3_command", metavar="<command>", parser_class=_Parser)
        actions.required = True
        if only is not None and name != only:
            continue
        for tool in tools:
            _add_tool(actions, tool)
        for admin in ADMIN_COMMANDS:
            if admin.domain == name:
                _add_admin(actions, admin, admin.name, admin.help)
        for (domain, old), new in RENAMED_COMMANDS.items():
            admin = next(c for c in ADMIN_COMMANDS if (c.domain, c.name) == new)
            if domain == name:
                _add_admin(actions, admin, old, f"Renamed: use `m3 {' '.join(new)}`.", renamed_from=(domain, old))
    return parser


def _add_admin(actions: Any, admin: AdminCommand, name: str, helptext: str,
               renamed_from: tuple[str, str] | None = None) -> None:
    admin_parser = actions.add_parser(name, help=helptext, description=helptext)
    admin.configure(admin_parser)
    admin_parser.set_defaults(m3_admin=admin, m3_renamed_from=renamed_from)


def flag_dest(field_name: str) -> str:
    """Where a tool argument's flag lands in the namespace: apart from the parser's own names (``domain``,
    ``tool`` …), which m3_index's ``--domain`` and m3_call's ``--tool`` would otherwise overwrite."""
    return f"arg:{field_name}"


def _add_tool(actions: Any, tool: ToolEntry) -> None:
    aliases = [tool["short_name"]] if tool["short_name"] != tool["name"] else []
    aliases += [dashed for dashed in (tool["short_name"].replace("_", "-"),) if dashed not in (*aliases, tool["name"])]
    aliases += tool.get("old_names", [])  # a renamed tool's old name; the service warns on call
    p = actions.add_parser(tool["name"], aliases=aliases, help=tool["summary"], description=tool["description"])
    old_names = {new: old for old, new in tool.get("renamed_args", {}).items()}
    for field in tool["fields"]:
        field_name, kind = field["name"], field["kind"]
        helptext = field["help"] + (" (JSON)" if kind == "json" else "")
        bare = {"nargs": "?", "const": "true"} if kind == "bool" else {}  # a bare --flag means true
        for name, shown in ((field_name, helptext), (old_names.get(field_name), argparse.SUPPRESS)):
            if name is not None:  # a renamed argument's old flag: hidden, renamed by the service (upgrade_args)
                flags = dict.fromkeys([f"--{name}", f"--{name.replace('_', '-')}"])  # --a_b and --a-b, once
                p.add_argument(*flags, dest=flag_dest(name), default=None, metavar=kind.upper(), help=shown, **bare)
    p.add_argument("--json-file", dest="json_file", default=None, metavar="PATH",
                   help="Read the arguments as a JSON object from PATH, or from stdin with -.")
    p.set_defaults(m3_tool=tool)  # not `tool`: m3_call has an argument of that name


def tool_arguments(tool: ToolEntry, ns: argparse.Namespace) -> dict[str, Any]:
    """Arguments from ``--json-file`` overlaid with the flags given."""
    args: dict[str, Any] = {}
    if ns.json_file is not None:
        args.update(_read_json_file(ns.json_file))
    old_names = {new: old for old, new in tool.get("renamed_args", {}).items()}
    for field in tool["fields"]:
        for name in (field["name"], old_names.get(field["name"])):
            raw = getattr(ns, flag_dest(name), None) if name else None
            if name is None or raw is None:
                continue
            if field["kind"] == "json":
                raw = _load_json(raw, f"--{name}", hint="Quote the JSON for the shell, e.g. --metadata '{\"k\": 1}'.")
            args[name] = raw
    return args


def _read_json_file(path: str) -> dict[str, Any]:
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidArgument(f"cannot read {path}: {exc.strerror}") from None
    data = _load_json(text, f"--json-file {path}")
    if not isinstance(data, dict):
        raise InvalidArgument("--json-file must hold a JSON object of arguments")
    return data


def _load_json(text: str, where: str, hint: str | None = None) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidArgument(f"{where} is not valid JSON: {exc.msg} (line {exc.lineno})", hint=hint) from None
    except RecursionError:
        hint = "Flatten the JSON; limits.max_json_depth bounds the nesting of any argument."
        raise FieldTooLarge(f"{where} is nested too deeply to read", hint=hint,
                            details={"field": where, "unit": "levels of nesting"}) from None


# --- running ------------------------------------------------------------------------------------

def run_tool(config: Config, name: str, args: dict[str, Any]) -> None:
    """Start m3, run one tool, print the result, then stop (finishing pending embeddings).

    SIGINT or SIGTERM during the call cancels it at once: :class:`Interrupted` is raised (exit status 130)
    and m3 stops without waiting for pending embeddings, which the next start finishes.
    """
    import trio

    from m3.gateway.runtime import running
    from m3.gateway.service import CallContext

    ctx = CallContext(agent_id=config["identity.agent_id"] or None, user_id=config["identity.user_id"] or None)
    # A one-shot command embeds only its own writes: the backlog is for servers and `m3 embedder reembed`.
    with running(config, background=False) as svc:
        try:
            result: dict[str, Any] = trio.run(_call_until_signalled, svc, name, args, ctx)
        except Interrupted:
            svc.system.stop(drain_embeddings=False)
            raise
        emit(result)  # before shutdown: the caller has its answer while embeddings finish


async def _call_until_signalled(svc: Any, name: str, args: dict[str, Any], ctx: Any) -> dict[str, Any]:
    """``svc.call(name, args, ctx)``, cancelled by SIGINT or SIGTERM (then :class:`Interrupted`)."""
    import trio

    if threading.current_thread() is not threading.main_thread():
        # Signals reach the main thread only (main() run from a worker thread, as by tests and embedders).
        return dict(await svc.call(name, args, ctx))
    outcome: dict[str, Any] = {}
    # Receiving the signals here (rather than trio's KeyboardInterrupt) also works when the shell started
    # m3 with SIGINT ignored, and ends the call through cancellation, never mid-way through trio itself.
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            async def call() -> None:
                try:
                    outcome["result"] = await svc.call(name, args, ctx)
                except M3Error as exc:
                    outcome["error"] = exc
                nursery.cancel_scope.cancel()

            nursery.start_soon(call)
            async for signum in signals:
                outcome["signal"] = signum
                nursery.cancel_scope.cancel()
                break
    if "signal" in outcome:
        raise Interrupted(f"{name} was interrupted by {signal.Signals(outcome['signal']).name}",
                          details={"signal": signal.Signals(outcome["signal"]).name, "signum": outcome["signal"]})
    if "error" in outcome:
        raise outcome["error"]
    return dict(outcome["result"])


def _load_config(argv: list[str]) -> Config:
    """The configuration; for ``m3 doctor`` the defaults when it does not load, so that doctor can say why."""
    try:
        return load_config()
    except M3Error as exc:
        if argv[:1] != ["doctor"] and argv[:2] != ["system", "doctor"]:
            raise
        from m3.gateway.doctor import FallbackConfig

        return FallbackConfig(exc, dict(os.environ))


def _deprecated(document: Any, note: str) -> Any:
    logging.getLogger("m3.cli").warning("%s", note)
    if isinstance(document, dict):
        document["warning"] = "; ".join(w for w in (document.get("warning"), note) if w)
    return document


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        # Started in the background by a shell, which ignores SIGINT for it: a SIGINT sent to this command
        # still means "stop" (KeyboardInterrupt below, or Interrupted during the call).
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        config = _load_config(argv)
        from m3.gateway.runtime import setup_logging

        setup_logging(config)
        if argv in ([], ["mcp"]):
            argv = ["mcp", "serve"]
        elif argv[0] in ALIASES:
            argv = [ALIASES[argv[0]].domain, ALIASES[argv[0]].name, *argv[1:]]
        mode = engine_mode(config)
        named = argv[0] if argv and not argv[0].startswith("-") else None
        ns = build_parser(_tool_entries(config, mode), only=named).parse_args(argv)
        if ns.m3_domain is None:
            raise UsageError("m3: give a domain and a command, e.g. `m3 memory write --content …`")
        admin: AdminCommand | None = getattr(ns, "m3_admin", None)
        if admin is not None:
            document = admin.run(config, ns)
            if ns.m3_renamed_from is not None:
                document = _deprecated(document, deprecation_note(ns.m3_renamed_from))
            from m3.gateway.doctor import Report

            if isinstance(document, Report):  # a command with an exit status of its own (m3 doctor)
                sys.stdout.write(document.text) if document.text else emit(document.document)
                return document.status
            if document is not None:
                emit(document)
            return 0
        tool: ToolEntry = ns.m3_tool
        args = tool_arguments(tool, ns)
        if mode == "engine":
            return relay_tool(config, tool["name"], args, changes=not tool["read_only"])
        from m3.gateway.registry import default_registry
        from m3.gateway.service import limits_of, validate_args

        registry = default_registry()
        known = registry.get(tool["name"])
        # Fail fast, before opening (or creating) the store.
        args = registry.upgrade_args(known, args)
        validate_args(known, args, limits_of(config))
        run_tool(config, tool["name"], args)
        return 0
    except UsageError as exc:
        emit_error({"code": "usage_error", "message": str(exc), "hint": "Run `m3 --help` or `m3 <domain> --help`."})
        return EXIT_USAGE
    except Interrupted as exc:
        emit_error(exc.to_dict())
        return 128 + int(exc.details.get("signum", signal.SIGINT))
    except M3Error as exc:
        emit_error(exc.to_dict())
        return EXIT_ERROR
    except KeyboardInterrupt:  # before or after the call (starting, stopping): still one JSON error
        emit_error(Interrupted("m3 was interrupted by SIGINT").to_dict())
        return EXIT_INTERRUPTED


def _tool_entries(config: Config, mode: str) -> list[ToolEntry]:
    """The tools of the command line: the cached manifest (engine mode: no registry import), else the registry."""
    if mode == "engine":
        from m3.gateway.engine.paths import engine_paths

        entries: list[ToolEntry] = manifest.ensure(engine_paths(config).manifest)["tools"]
        return entries
    from m3.gateway.registry import default_registry

    built: list[ToolEntry] = manifest.build(default_registry(), schemas=False)["tools"]
    return built


def relay_tool(config: Config, name: str, args: dict[str, Any], *, changes: bool = True) -> int:
    """Run tool ``name`` in the store's engine (started if need be); print its answer; the exit status.

    After a change, as in embedded mode, the command ends once the engine has embedded what was written
    (bounded by ``embed.drain_timeout_s``), so the next command sees its vectors and supersessions.
    """
    from m3.gateway.engine.calls import flush, relay

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _interrupt_on_sigterm)
    try:
        _status, body = relay(config, name, args)
    except KeyboardInterrupt:
        raise Interrupted(f"{name} was interrupted by SIGINT",
                          details={"signal": "SIGINT", "signum": int(signal.SIGINT)}) from None
    if isinstance(body, dict) and set(body) == {"error"}:
        emit_error(body["error"])
        return EXIT_ERROR
    emit(body)  # before the flush: the caller has its answer while embeddings finish
    if changes:
        with contextlib.suppress(KeyboardInterrupt):  # the answer is out; the engine embeds the rest anyway
            flush(config)
    return 0


def _interrupt_on_sigterm(signum: int, frame: object) -> None:
    raise Interrupted(f"the call was interrupted by {signal.Signals(signum).name}",
                      details={"signal": signal.Signals(signum).name, "signum": signum})


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
