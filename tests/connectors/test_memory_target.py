"""The in-memory target passes the Target contract (so unit tests can trust it)."""

import pytest

from ledger_stream.connector.memory import MemoryTarget
from ledger_stream.testing.targets import DeduplicatingTargetContract, TargetContract

pytestmark = pytest.mark.timeout(30)


class _Unreachable(MemoryTarget):
    def apply(self, request, timeout_s):
        self.fail_next("refuse")
        return super().apply(request, timeout_s)


class TestMemoryTarget(DeduplicatingTargetContract):
    @pytest.fixture
    def target(self):
        return MemoryTarget()

    @pytest.fixture
    def unreachable(self):
        return _Unreachable(queryable=False)

    def effects(self, target, key):
        return target.effect_count(key)


class TestMemoryTargetWithoutDedup(TargetContract):
    @pytest.fixture
    def target(self):
        return MemoryTarget(deduplicates=False)

    @pytest.fixture
    def unreachable(self):
        return _Unreachable(queryable=False)

    def effects(self, target, key):
        return target.effect_count(key)
