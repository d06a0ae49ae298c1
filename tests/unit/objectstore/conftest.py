"""Fixtures: a store on the session's SeaweedFS (``seaweed``:
tests/conftest.py) under a prefix no other test uses."""
from __future__ import annotations

import itertools
import os

import pytest

from magnetar.objectstore.s3 import open_object_store

_prefixes = itertools.count()


@pytest.fixture
def store_url(seaweed) -> str:
    return seaweed.store_url(f"test-{os.getpid()}-{next(_prefixes)}")


@pytest.fixture
async def store(store_url, monkeypatch):
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    s = open_object_store(store_url)
    try:
        yield s
    finally:
        await s.close()
