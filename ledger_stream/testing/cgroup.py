"""A memory cgroup of its own for one test's processes (cgroup v1 ``memory`` or v2), so a
test can run a process under a real kernel memory limit and read what the kernel did to it:
its peak usage and how many times it OOM-killed a member.

Needs root and a writable cgroup hierarchy (CI runs as root); ``available()`` says whether
this machine has one. Processes join at exec (see ``Proc``), so everything they allocate is
charged to the group.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from pathlib import Path

V1_ROOT = Path("/sys/fs/cgroup/memory")
V2_ROOT = Path("/sys/fs/cgroup")


class MemoryCgroup:
    def __init__(self, path: Path, v2: bool) -> None:
        self.path = path
        self.v2 = v2

    @classmethod
    def create(cls, limit_bytes: int) -> MemoryCgroup:
        v2 = not V1_ROOT.is_dir()
        root = V2_ROOT if v2 else V1_ROOT
        group = cls(root / f"ledger-test-{uuid.uuid4().hex[:8]}", v2)
        group.path.mkdir()
        group.set_limit(limit_bytes)
        return group

    @property
    def procs(self) -> Path:
        """Write a PID here to move that process into the group."""
        return self.path / "cgroup.procs"

    def set_limit(self, limit_bytes: int) -> None:
        name = "memory.max" if self.v2 else "memory.limit_in_bytes"
        (self.path / name).write_text(str(limit_bytes))

    def try_limit(self, limit_bytes: int) -> bool:
        """Lower the limit if the kernel agrees: below the group's usage a cgroup v1 write
        fails with EBUSY when it cannot reclaim enough. False when refused."""
        try:
            self.set_limit(limit_bytes)
        except OSError:
            return False
        return True

    def usage_bytes(self) -> int:
        name = "memory.current" if self.v2 else "memory.usage_in_bytes"
        return int((self.path / name).read_text())

    def peak_bytes(self) -> int:
        """The highest usage the kernel charged to the group (page cache included)."""
        name = "memory.peak" if self.v2 else "memory.max_usage_in_bytes"
        return int((self.path / name).read_text())

    def oom_kills(self) -> int:
        """How many processes of the group the kernel killed for memory."""
        name = "memory.events" if self.v2 else "memory.oom_control"
        for line in (self.path / name).read_text().splitlines():
            field, _, value = line.partition(" ")
            if field == "oom_kill":
                return int(value)
        return 0

    def remove(self) -> None:
        """Remove the group; its processes must have exited (stopped by PID first)."""
        with contextlib.suppress(FileNotFoundError):
            self.path.rmdir()


def available() -> bool:
    """Whether this process may create memory cgroups here (root, a writable hierarchy)."""
    if os.geteuid() != 0:
        return False
    try:
        MemoryCgroup.create(1 << 30).remove()
    except OSError:
        return False
    return True
