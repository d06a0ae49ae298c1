"""Fixtures of the console tests: a real Chromium on a real broker."""
from __future__ import annotations

import pytest

from .browser import Browser, missing


@pytest.fixture
def browser_on():
    """``browser_on(admin_url)``: a fresh Chromium on that broker's console, closed after the test."""
    reason = missing()
    if reason:
        raise AssertionError(reason)
    opened = []

    def open_on(admin_url: str, flags: tuple[str, ...] = ()) -> Browser:
        b = Browser(admin_url, flags)
        opened.append(b)
        return b

    yield open_on
    for b in opened:
        b.close()
