"""The connector core for unit tests, with every event it asks to produce checked on the
wire format (a field left None or of the wrong type would be refused by the broker's
consumers)."""

from __future__ import annotations

from ledger_stream.connector.commands import Produce
from ledger_stream.connector.core import ConnectorCore
from ledger_stream.serde import AvroCodec

CODEC = AvroCodec()


class CheckedCore(ConnectorCore):
    def _checked(self, commands):
        for cmd in commands:
            if isinstance(cmd, Produce):
                assert CODEC.decode(CODEC.encode(cmd.event)) == cmd.event
        return commands

    def record(self, *a): return self._checked(super().record(*a))  # noqa: E704
    def produced(self, *a, **k): return self._checked(super().produced(*a, **k))  # noqa: E704
    def called(self, *a): return self._checked(super().called(*a))  # noqa: E704
    def looked_up(self, *a): return self._checked(super().looked_up(*a))  # noqa: E704
    def fenced(self, *a): return self._checked(super().fenced(*a))  # noqa: E704
    def tick(self, *a): return self._checked(super().tick(*a))  # noqa: E704
    def revoked(self, *a): return self._checked(super().revoked(*a))  # noqa: E704
    def shutdown(self, *a): return self._checked(super().shutdown(*a))  # noqa: E704
