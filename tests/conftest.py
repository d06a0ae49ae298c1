"""Fixtures every test may use. Plain helpers (waiting, names, loggers) are in
tests/helpers.py; the processes a test starts are magnetar_harness's."""
from __future__ import annotations

import pytest

from tests.helpers import wait_until as _wait_until


@pytest.fixture
def wait_until():
    """:func:`tests.helpers.wait_until`, for tests that take it as a fixture."""
    return _wait_until
