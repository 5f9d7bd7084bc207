"""A memory cgroup of its own for one test's processes (cgroup v1 ``memory`` or v2), so a
test can run a process under a real kernel memory limit and read what the kernel did to it:
its peak usage and how many times it OOM-killed a member. Swap is ruled out (a process
over its limit is killed, not paged out).

The group is made under this process's own memory cgroup when it may be (so what it holds
stays inside this session's limit and accounting), else at the hierarchy's root. Needs root
and a writable hierarchy (CI runs as root); ``available()`` says whether this machine has
one. Processes join at exec (see ``Proc``), so everything they allocate is charged to the
group.
"""

from __future__ import annotations

import contextlib
import errno
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
        """A new group with ``limit_bytes``; OSError (nothing left behind) when none can be
        made here."""
        v2 = not V1_ROOT.is_dir()
        root = V2_ROOT if v2 else V1_ROOT
        failure: OSError | None = None
        for parent in dict.fromkeys((_own_cgroup(root, v2), root)):
            group = cls(parent / f"ledger-test-{uuid.uuid4().hex[:8]}", v2)
            try:
                group.path.mkdir()
            except OSError as exc:
                failure = exc
                continue
            try:
                group._no_swap()
                group.set_limit(limit_bytes)
            except OSError as exc:
                group.remove()
                failure = exc
                continue
            return group
        raise failure or OSError("no memory cgroup hierarchy")

    @property
    def procs(self) -> Path:
        """Write a PID here to move that process into the group."""
        return self.path / "cgroup.procs"

    def set_limit(self, limit_bytes: int) -> None:
        """The group's memory limit (v1: memory and memory+swap alike, in the order the
        kernel accepts: memory+swap may never be below memory)."""
        if self.v2:
            (self.path / "memory.max").write_text(str(limit_bytes))
            return
        memory = self.path / "memory.limit_in_bytes"
        memsw = self.path / "memory.memsw.limit_in_bytes"
        if not memsw.exists():
            memory.write_text(str(limit_bytes))
            return
        raising = limit_bytes > int(memory.read_text())
        for name in ((memsw, memory) if raising else (memory, memsw)):
            name.write_text(str(limit_bytes))

    def squeeze(self, attempts: int = 50) -> int:
        """Lower the limit to what the group uses now, and return it. The kernel refuses a
        limit it cannot reclaim down to (EBUSY): the group's usage may have grown between
        the reading and the writing (a processor answering a backlog), so it is read and
        tried again (a CI run met it once, 2026-12-07)."""
        for _ in range(attempts - 1):
            usage = self.usage_bytes()
            try:
                self.set_limit(usage)
                return usage
            except OSError as exc:
                if exc.errno != errno.EBUSY:
                    raise
        usage = self.usage_bytes()
        self.set_limit(usage)
        return usage

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

    def _no_swap(self) -> None:
        if self.v2:
            swap = self.path / "memory.swap.max"
            if swap.exists():
                swap.write_text("0")
        else:
            swappiness = self.path / "memory.swappiness"
            if swappiness.exists():
                swappiness.write_text("0")


def _own_cgroup(root: Path, v2: bool) -> Path:
    """This process's own memory cgroup folder (``root`` when it cannot be told)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return root
    for line in lines:
        hierarchy, controllers, path = line.split(":", 2)
        if (v2 and hierarchy == "0") or (not v2 and "memory" in controllers.split(",")):
            return root / path.lstrip("/")
    return root


def available() -> bool:
    """Whether this process may create memory cgroups here (root, a writable hierarchy)."""
    if os.geteuid() != 0:
        return False
    try:
        MemoryCgroup.create(1 << 30).remove()
    except OSError:
        return False
    return True
