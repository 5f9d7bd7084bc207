"""A throwaway PostgreSQL server for tests, the benchmark and the falsification matrix:
``initdb`` into a temporary folder, started with ``pg_ctl`` on a free loopback port, stopped,
crashed (SIGKILL) and restarted by PID.

PostgreSQL refuses to run as root, so when the tests run as root every server command runs
as the ``postgres`` OS user (Debian's ``postgresql`` package creates it), and the folder
belongs to that user. The server binaries come from ``/usr/lib/postgresql/<version>/bin``
(the newest installed), or from the folder of ``pg_ctl`` on PATH.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg

from ledger_lab.local_kafka.ports import pick_free_ports

HOST = "127.0.0.1"


class PostgresUnavailable(RuntimeError):
    """No server binaries, no OS user to run them as, or the server did not start."""

SERVER_USER = "postgres"  # the OS user the server runs as when we are root
_BINARIES = ("initdb", "pg_ctl", "postgres")
_INSTALL_HINT = "install the Debian package postgresql (apt-get install postgresql)"


def find_bin_dir() -> Path:
    """The folder holding initdb, pg_ctl and postgres: the newest /usr/lib/postgresql/*/bin,
    else the folder pg_ctl on PATH resolves to. Raises PostgresUnavailable when there is none."""

    def version(folder: str) -> tuple[int, ...]:
        name = Path(folder).parent.name
        return tuple(int(p) for p in name.split(".") if p.isdigit())

    candidates = [Path(d) for d in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=version)]
    on_path = shutil.which("pg_ctl")
    if on_path:
        candidates.insert(0, Path(on_path).resolve().parent)
    for folder in reversed(candidates):
        if all((folder / name).exists() for name in _BINARIES):
            return folder
    raise PostgresUnavailable(f"PostgreSQL server binaries ({', '.join(_BINARIES)}) not found in "
                       f"/usr/lib/postgresql/*/bin or on PATH: {_INSTALL_HINT}")


def _server_user() -> pwd.struct_passwd | None:
    """The account to run the server as: ``postgres`` when we are root, else ourselves."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(SERVER_USER)
    except KeyError:
        raise PostgresUnavailable(f"running as root: PostgreSQL needs a non-root OS user "
                           f"{SERVER_USER!r} (useradd --system {SERVER_USER}, or "
                           f"{_INSTALL_HINT})") from None


def _alive(pid: int) -> bool:
    """True while ``pid`` runs a postgres program: not a zombie, and not a PID the system has
    given to another program since a stale postmaster.pid was written."""
    try:
        return b"postgres" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return False


def _exists(pid: int) -> bool:
    """True while ``pid`` exists at all, zombies included: PostgreSQL refuses to start while
    the PID in postmaster.pid exists."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _children(pid: int) -> list[int]:
    """The PIDs whose parent is ``pid`` (from /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[1] == str(pid):
            found.append(int(stat.parent.name))
    return found


class PostgresServer:
    """One PostgreSQL server in its own temporary folder.

    ``start()`` returns once a psycopg connection succeeds (or raises PostgresUnavailable with the
    server log's tail). ``dsn`` connects as the superuser ``postgres`` to database
    ``postgres`` over TCP on 127.0.0.1 (trust authentication). ``kill()`` is a crash;
    ``restart()`` starts the same data folder on the same port (crash recovery after a kill).
    ``remove()`` stops the server and deletes the folder.
    """

    def __init__(self, bin_dir: Path | None = None, port: int | None = None,
                 ready_timeout_s: float = 30.0) -> None:
        self.bin_dir = bin_dir or find_bin_dir()
        missing = [name for name in _BINARIES if not (self.bin_dir / name).exists()]
        if missing:
            raise PostgresUnavailable(
                f"{', '.join(missing)} missing in {self.bin_dir}: {_INSTALL_HINT}")
        self.port = port or pick_free_ports(1, HOST)[0]
        self.ready_timeout_s = ready_timeout_s
        self._user = _server_user()
        self.base = Path(tempfile.mkdtemp(prefix="ledger-pg-"))
        self.data_dir = self.base / "data"
        self.socket_dir = self.base / "socket"
        self.log = self.base / "server.log"
        self.socket_dir.mkdir()
        self.log.touch()
        if self._user is not None:
            for path in (self.base, self.socket_dir, self.log):
                os.chown(path, self._user.pw_uid, self._user.pw_gid)

    @property
    def dsn(self) -> str:
        return f"host={HOST} port={self.port} user=postgres dbname=postgres"

    @property
    def version(self) -> str:
        """The server's major version, from the binaries' folder (``15``)."""
        return self.bin_dir.parent.name

    def new_database(self) -> str:
        """A DSN to a new, empty database of its own (``t_<hex>``)."""
        from psycopg import sql
        from psycopg.conninfo import make_conninfo

        name = f"t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.dsn, autocommit=True) as admin:
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return make_conninfo(self.dsn, dbname=name)

    def start(self) -> PostgresServer:
        """Start the server (running initdb first if the folder is new) and wait until it
        accepts connections."""
        if not (self.data_dir / "PG_VERSION").exists():
            self._initdb()
        stale_pid = self.pid()  # left behind by a kill(); the new postmaster replaces it
        log_offset = self.log.stat().st_size
        # -W: pg_ctl returns at once; readiness is decided by a real client connection.
        self._run("pg_ctl", "start", "-W", "-D", str(self.data_dir), "-l", str(self.log))
        self._wait_ready(stale_pid, log_offset)
        return self

    def stop(self, timeout_s: float = 30.0) -> None:
        """Fast shutdown (clients disconnected, a clean checkpoint); SIGKILL if it hangs."""
        pid = self.pid()
        if pid is None or not _alive(pid):
            return
        with contextlib.suppress(PostgresUnavailable, subprocess.TimeoutExpired):
            self._run("pg_ctl", "stop", "-D", str(self.data_dir), "-m", "fast", "-w",
                      "-t", str(int(timeout_s)), timeout_s=timeout_s + 5)
        if _alive(pid):
            self.kill()

    def kill(self, timeout_s: float = 15.0) -> None:
        """SIGKILL the postmaster, then its backends: a crash, no shutdown checkpoint, open
        connections dropped without a goodbye. Returns once the processes are gone."""
        pid = self.pid()
        if pid is None or not _alive(pid):
            return
        # Freeze the postmaster first: it cannot notice a dead backend and start crash
        # recovery, and the backends cannot notice a dead postmaster and say goodbye to
        # their clients. Then every process dies at once, as in a machine crash.
        os.kill(pid, signal.SIGSTOP)
        backends = _children(pid)
        for victim in (*backends, pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(victim, signal.SIGKILL)
        # The postmaster is not our child: whoever adopted it reaps it, and until then its
        # PID still exists, which makes a restart refuse to start. Wait for both.
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not _exists(pid) and not any(_alive(b) for b in backends):
                return
            time.sleep(0.02)
        raise PostgresUnavailable(f"postmaster {pid} still exists {timeout_s}s after SIGKILL")

    def restart(self) -> PostgresServer:
        """Start again on the same data folder and port (after ``stop()`` or ``kill()``)."""
        pid = self.pid()
        if pid is not None and _alive(pid):
            self.stop()
        return self.start()

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.base, ignore_errors=True)

    def running(self) -> bool:
        """True while the postmaster runs (a kill() or stop() ends it)."""
        pid = self.pid()
        return pid is not None and _alive(pid)

    def pid(self) -> int | None:
        """The postmaster's PID from ``postmaster.pid``, None when there is no such file."""
        try:
            first = (self.data_dir / "postmaster.pid").read_text().split("\n", 1)[0]
        except FileNotFoundError:
            return None
        return int(first) if first.strip().isdigit() else None

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no server log)"

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.remove()

    def _initdb(self) -> None:
        self._run("initdb", "-D", str(self.data_dir), "-U", "postgres", "--auth=trust",
                  "--encoding=UTF8", "--no-locale", "--no-sync", timeout_s=120)
        settings = {
            "listen_addresses": f"'{HOST}'",
            "port": str(self.port),
            "unix_socket_directories": f"'{self.socket_dir}'",
            # A test server: a process crash (SIGKILL) still recovers from the WAL in the
            # OS page cache; only a machine crash would need fsync.
            "fsync": "off",
            "max_connections": "50",
        }
        with (self.data_dir / "postgresql.conf").open("a") as conf:
            conf.write("\n# ledger-stream test server\n")
            conf.writelines(f"{name} = {value}\n" for name, value in settings.items())

    def _wait_ready(self, stale_pid: int | None, log_offset: int) -> None:
        deadline = time.monotonic() + self.ready_timeout_s
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            try:
                with psycopg.connect(self.dsn, connect_timeout=2):
                    return
            except psycopg.Error as exc:
                last_error = exc
            if self._exited_since(stale_pid, log_offset):
                break  # no point waiting for a postmaster that gave up
            time.sleep(0.05)
        raise PostgresUnavailable(f"PostgreSQL on {HOST}:{self.port} did not start (the last "
                           f"connection attempt: {last_error}); server log "
                           f"{self.log}:\n{self.log_tail()}")

    def _exited_since(self, stale_pid: int | None, log_offset: int) -> bool:
        """True when the postmaster started after ``log_offset`` has exited (a bad setting,
        a taken port): it says so in the log, or its PID is gone."""
        with self.log.open("rb") as log:
            log.seek(log_offset)
            if b"database system is shut down" in log.read():
                return True
        pid = self.pid()
        return pid is not None and pid != stale_pid and not _alive(pid)

    def _run(self, binary: str, *args: str, timeout_s: float = 60.0) -> None:
        kwargs: dict[str, Any] = {}
        if self._user is not None:
            kwargs = {"user": self._user.pw_uid, "group": self._user.pw_gid,
                      "extra_groups": []}
        done = subprocess.run(
            [str(self.bin_dir / binary), *args], cwd=self.base, capture_output=True,
            text=True, timeout=timeout_s, env={**os.environ, "LC_ALL": "C"}, check=False,
            **kwargs,
        )
        if done.returncode != 0:
            raise PostgresUnavailable(f"{binary} {' '.join(args)} exited {done.returncode}: "
                               f"{done.stderr.strip() or done.stdout.strip()}\n"
                               f"server log {self.log}:\n{self.log_tail()}")
