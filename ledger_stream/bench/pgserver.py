"""A throwaway PostgreSQL server for the PostgreSQL arms: ``initdb`` in a temporary folder,
``pg_ctl`` on a free loopback port, stopped by the postmaster's PID.

The server keeps PostgreSQL's default durability (``fsync`` and ``synchronous_commit`` on):
the claim loop it stands for runs that way in production. Run as root, every server
command runs as the ``postgres`` OS user (PostgreSQL refuses root).
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
from pathlib import Path
from typing import Any

from ledger_stream.bench.exceptions import BenchError
from ledger_stream.kafka.local.ports import pick_free_ports

HOST = "127.0.0.1"


def _bin_dir() -> Path:
    def version(folder: str) -> tuple[int, ...]:
        return tuple(int(p) for p in Path(folder).parent.name.split(".") if p.isdigit())

    for folder in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=version, reverse=True):
        if (Path(folder) / "pg_ctl").exists():
            return Path(folder)
    on_path = shutil.which("pg_ctl")
    if on_path:
        return Path(on_path).resolve().parent
    raise BenchError("PostgreSQL server binaries not found (apt-get install postgresql)")


class PgServer:
    """One server; ``dsn`` connects as ``postgres`` over TCP with trust authentication."""

    def __init__(self) -> None:
        self.bin_dir = _bin_dir()
        self.port = pick_free_ports(1, HOST)[0]
        self.base = Path(tempfile.mkdtemp(prefix="ledger-bench-pg-"))
        self.data = self.base / "data"
        self.log = self.base / "server.log"
        self._user = pwd.getpwnam("postgres") if os.geteuid() == 0 else None
        if self._user is not None:
            os.chown(self.base, self._user.pw_uid, self._user.pw_gid)

    @property
    def dsn(self) -> str:
        return f"host={HOST} port={self.port} user=postgres dbname=postgres"

    @property
    def version(self) -> str:
        return self.bin_dir.parent.name

    def start(self, timeout_s: float = 30.0) -> PgServer:
        try:
            import psycopg
        except ImportError as exc:
            raise BenchError("the PostgreSQL arms need psycopg (pip install 'psycopg[binary]'); "
                             "or leave them out with --arms") from exc

        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust",
                  "--encoding=UTF8", "--no-locale")
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.write(f"listen_addresses = '{HOST}'\nport = {self.port}\n"
                       f"unix_socket_directories = '{self.base}'\nmax_connections = 40\n")
        self._run("pg_ctl", "start", "-W", "-D", str(self.data), "-l", str(self.log))
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with contextlib.suppress(psycopg.Error), psycopg.connect(self.dsn,
                                                                     connect_timeout=2):
                return self
            time.sleep(0.1)
        self.stop()
        raise BenchError(f"PostgreSQL did not accept connections within {timeout_s} s:\n"
                         f"{self.log.read_text(errors='replace')[-2000:]}")

    def pid(self) -> int | None:
        with contextlib.suppress(OSError, ValueError):
            return int((self.data / "postmaster.pid").read_text().split("\n", 1)[0])
        return None

    def stop(self, timeout_s: float = 30.0) -> None:
        """Fast shutdown by the postmaster's PID (SIGINT), SIGKILL after ``timeout_s``;
        then the folder is deleted."""
        pid = self.pid()
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGINT)
                deadline = time.monotonic() + timeout_s
                while _running(pid) and time.monotonic() < deadline:
                    time.sleep(0.05)
                if _running(pid):
                    os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.base, ignore_errors=True)

    def __enter__(self) -> PgServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _run(self, binary: str, *args: str) -> None:
        kwargs: dict[str, Any] = {}
        if self._user is not None:
            kwargs = {"user": self._user.pw_uid, "group": self._user.pw_gid, "extra_groups": []}
        done = subprocess.run([str(self.bin_dir / binary), *args], cwd=self.base, text=True,
                              capture_output=True, timeout=120, check=False,
                              env={**os.environ, "LC_ALL": "C"}, **kwargs)
        if done.returncode != 0:
            raise BenchError(f"{binary} exited {done.returncode}: {done.stderr.strip()}")


def _running(pid: int) -> bool:
    """True while ``pid`` is a live postgres (not a zombie, not a reused PID)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return b"postgres" in Path(f"/proc/{pid}/cmdline").read_bytes() and \
            stat.rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
