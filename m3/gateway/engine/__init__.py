"""The engine: one long-lived process per store hosting the actors, and the thin front-ends that relay to it.

``paths`` (where its socket, locks and log live), ``client`` (HTTP over the Unix socket, standard library
only, for the quick CLI path), ``spawn`` (start on first use under a lock, version check), ``server`` (the
engine process), ``relay`` (bare ``m3``: MCP on stdio relayed to the engine, framed by ``jsonrpc``),
``manifest`` (the tool list front-ends build their command line and MCP list from without importing the
registry).
See docs/architecture.md, "The engine".
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from m3.config import Config
    from m3.gateway.doctor import Check, Finding


def doctor_checks() -> list[Check]:
    """``m3 doctor``'s engine checks: the mode, the run directory's and socket's modes, a running engine's
    version and settings against this front-end's."""
    from m3.gateway.doctor import Check

    return [Check("engine", _engine)]


def _engine(config: Config) -> list[Finding]:
    from m3 import __version__
    from m3.errors import M3Error
    from m3.gateway.doctor import Finding
    from m3.gateway.engine.paths import engine_mode, engine_paths, settings_fingerprint
    from m3.gateway.engine.spawn import engine_status

    try:
        mode = engine_mode(config)
    except M3Error as exc:
        return [Finding("engine.mode", "fail", exc.message, exc.hint)]
    if mode == "embedded":
        return [Finding("engine.mode", "ok", "engine.mode is embedded: every m3 process runs its own actors")]
    paths = engine_paths(config)
    found = [Finding("engine.mode", "ok", "engine.mode is engine: m3 commands and MCP clients share one engine")]
    for path, mode_wanted in ((paths.run_dir, 0o700), (paths.sock, 0o600)):
        if path.exists() and path.stat().st_mode & 0o077:
            found.append(Finding("engine.files", "fail", f"{path} is open to other users",
                                 f"Run `m3 engine stop`, then `chmod {mode_wanted:o} {path}`."))
    status = engine_status(config)
    if not status["running"]:
        found.append(Finding("engine.status", "ok", "no engine runs for this store; the first command starts one"))
    elif status.get("version") != __version__ or status.get("settings") != settings_fingerprint(config):
        found.append(Finding("engine.status", "warn", f"the running engine (pid {status.get('pid')}) has another "
                             "version or other settings; the next command replaces it once it is idle",
                             "Run `m3 engine stop` to replace it now."))
    else:
        found.append(Finding("engine.status", "ok", f"the engine runs (pid {status.get('pid')}, log {paths.log})"))
    return found
