"""A throwaway PostgreSQL server for test tools (the falsification matrix's PostgresSaver):
``initdb`` into a temporary folder, ``pg_ctl`` on a free loopback port, one fresh database
per caller, stopped by ``pg_ctl`` (SIGKILL by the postmaster's PID if that hangs) and
removed at the end.

PostgreSQL refuses to run as root, so as root every server command runs as the
``postgres`` OS user (Debian's ``postgresql`` package creates it). The binaries come from
the newest ``/usr/lib/postgresql/<version>/bin``, or from the folder of ``pg_ctl`` on PATH.
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

from ledger_stream.kafka.local.ports import pick_free_ports

HOST = "127.0.0.1"
INSTALL_HINT = "install the Debian package postgresql (apt-get install postgresql)"


class PostgresUnavailable(RuntimeError):
    """No server binaries, no OS user to run them as, or the server did not start."""


def find_bin_dir() -> Path:
    def version(folder: str) -> tuple[int, ...]:
        return tuple(int(p) for p in Path(folder).parent.name.split(".") if p.isdigit())

    for folder in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=version, reverse=True):
        if all((Path(folder) / name).exists() for name in ("initdb", "pg_ctl", "postgres")):
            return Path(folder)
    on_path = shutil.which("pg_ctl")
    if on_path:
        return Path(on_path).resolve().parent
    raise PostgresUnavailable(f"PostgreSQL server binaries not found: {INSTALL_HINT}")


class ThrowawayPostgres:
    """``with ThrowawayPostgres() as pg: dsn = pg.new_database()``."""

    def __init__(self, ready_timeout_s: float = 30.0) -> None:
        self.bin_dir = find_bin_dir()
        self.port = pick_free_ports(1, HOST)[0]
        self.ready_timeout_s = ready_timeout_s
        try:
            self._user = pwd.getpwnam("postgres") if os.geteuid() == 0 else None
        except KeyError:
            raise PostgresUnavailable(f"running as root, PostgreSQL needs an OS user "
                                      f"'postgres': {INSTALL_HINT}") from None
        self.base = Path(tempfile.mkdtemp(prefix="ledger-pg-"))
        self.data = self.base / "data"
        self.log = self.base / "server.log"
        if self._user is not None:
            os.chown(self.base, self._user.pw_uid, self._user.pw_gid)

    @property
    def dsn(self) -> str:
        return f"host={HOST} port={self.port} user=postgres dbname=postgres"

    def start(self) -> ThrowawayPostgres:
        import psycopg

        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust",
                  "--encoding=UTF8", "--no-locale", "--no-sync", timeout_s=120)
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.write(f"listen_addresses = '{HOST}'\nport = {self.port}\n"
                       f"unix_socket_directories = '{self.base}'\nfsync = off\n"
                       "max_connections = 100\n")
        self._run("pg_ctl", "start", "-W", "-D", str(self.data), "-l", str(self.log))
        deadline = time.monotonic() + self.ready_timeout_s
        while True:
            try:
                with psycopg.connect(self.dsn, connect_timeout=2):
                    return self
            except psycopg.Error as exc:
                if time.monotonic() > deadline:
                    self.remove()
                    raise PostgresUnavailable(f"PostgreSQL did not start: {exc}") from exc
            time.sleep(0.1)

    def new_database(self) -> str:
        """A DSN to a new, empty database of its own."""
        import psycopg
        from psycopg import sql
        from psycopg.conninfo import make_conninfo

        name = f"f_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.dsn, autocommit=True) as admin:
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return make_conninfo(self.dsn, dbname=name)

    def remove(self) -> None:
        """Stop the server (fast shutdown; SIGKILL by PID if it hangs), delete the folder."""
        if (self.data / "postmaster.pid").exists():
            try:
                self._run("pg_ctl", "stop", "-D", str(self.data), "-m", "fast", "-w",
                          "-t", "20", timeout_s=30)
            except (PostgresUnavailable, subprocess.TimeoutExpired):
                self._kill()
        shutil.rmtree(self.base, ignore_errors=True)

    def __enter__(self) -> ThrowawayPostgres:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.remove()

    def _kill(self) -> None:
        with contextlib.suppress(OSError, ValueError, IndexError):
            pid = int((self.data / "postmaster.pid").read_text().split("\n", 1)[0])
            os.kill(pid, signal.SIGKILL)

    def _run(self, binary: str, *args: str, timeout_s: float = 60.0) -> None:
        kwargs: dict[str, Any] = {}
        if self._user is not None:
            kwargs = {"user": self._user.pw_uid, "group": self._user.pw_gid,
                      "extra_groups": []}
        done = subprocess.run([str(self.bin_dir / binary), *args], cwd=self.base,
                              capture_output=True, text=True, timeout=timeout_s,
                              env={**os.environ, "LC_ALL": "C"}, check=False, **kwargs)
        if done.returncode != 0:
            raise PostgresUnavailable(f"{binary} exited {done.returncode}: "
                                      f"{(done.stderr or done.stdout).strip()[-500:]}")
