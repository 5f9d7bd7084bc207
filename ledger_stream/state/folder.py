"""The state folder of one processor: ``<state_dir>/<consumer group>/p<partition>``, one
RocksDB per partition, and a lock file that one live process holds while it runs."""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
from pathlib import Path

from ledger_stream.state.exceptions import StateFolderLocked, StoreError
from ledger_stream.state.rocksdb import RocksDBPartitionStore

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


class StateFolder:
    """The folder of one consumer group's partitions under ``state_dir``."""

    def __init__(self, state_dir: Path, group: str) -> None:
        self.root = state_dir.resolve() / _UNSAFE.sub("_", group)
        self._lock_fd: int | None = None

    def instance_hash(self) -> str:
        """A short stable id of this folder: the default processor instance id."""
        return hashlib.sha256(str(self.root).encode()).hexdigest()[:12]

    def lock(self) -> None:
        """Hold the folder for this process until :meth:`unlock` or exit (the kernel drops
        the lock of a dead process). Raises StateFolderLocked when another holds it."""
        self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.root / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            os.close(fd)
            raise StateFolderLocked(
                f"another processor is running on the state folder {self.root}: stop it, "
                "or give this one its own --state-dir") from exc
        except OSError as exc:
            os.close(fd)
            raise StoreError(f"cannot lock the state folder {self.root}: {exc}") from exc
        self._lock_fd = fd

    def unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def open(self, partition: int) -> RocksDBPartitionStore:
        return RocksDBPartitionStore(self.root / f"p{partition}", partition)
