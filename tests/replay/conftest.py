"""The offline client fixture (tests/upgrade/support.py) for these tests."""

from tests.upgrade.support import client  # noqa: F401 - a fixture
