"""The connector process's side of a fence (``pregrant.py``; docs/connectors.md, 'The
pre-granted first attempt'): asked as an asynchronous offset commit on the loop's thread,
answered by the consumer's ``on_commit`` inside a later ``poll`` (``feed.py``), so that the
loop goes on serving every other key meanwhile; and never asked, nor called on, once
SIGTERM came.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from ledger_stream.connector.call_outcome import now_ms
from ledger_stream.connector.commands import Command, Fence

if TYPE_CHECKING:
    from ledger_stream.connector.core import ConnectorCore
    from ledger_stream.connector.feed import DispatchFeed


class FenceDriver:
    """Mixed into ``ConnectorWorker``: the state it shares is declared here."""

    if TYPE_CHECKING:
        _core: ConnectorCore
        _feed: DispatchFeed
        _done: queue.SimpleQueue[Callable[[], list[Command]]]
        _stopping: threading.Event
        _asked: dict[tuple[int, int], int]

        def _execute(self, commands: list[Command]) -> None: ...

    def _fence(self, cmd: Fence) -> list[Command]:
        """Ask to commit past a pre-granted record (the answer: ``_fenced``); never once
        SIGTERM came (a fence asked then would end in a fenced claim and ``not_called``):
        reported failed then, and the closing core drops the job."""
        if not self._shut_down() and self._feed.fence(cmd.partition, cmd.offset):
            self._asked[(cmd.partition, cmd.offset)] = cmd.job_id
            return []
        return self._core.fenced(cmd.job_id, False, now_ms())

    def _fenced(self, partition: int, offset: int, ok: bool) -> None:
        """A fence's answer (the feed's ``on_fenced``, inside ``poll``): to the core on this
        pass of the loop. After SIGTERM a fence that landed is claimed and reported
        ``not_called`` (the record's next owner does not read it again): the claim's
        acknowledgement finds the core closing."""
        job_id = self._asked.pop((partition, offset), None)
        if job_id is not None:
            self._done.put(lambda: self._core.fenced(job_id, ok, now_ms()))

    def _shut_down(self, now: bool = False) -> bool:
        """Whether the connector is closing. The shutdown starts here (or ``now``), on the
        loop's thread, as soon as SIGTERM came, even in the middle of a pass: no fence is
        asked and no pre-granted call starts after it."""
        if (now or self._stopping.is_set()) and not self._core.closing:
            self._execute(self._core.shutdown(now_ms()))
        return self._core.closing
