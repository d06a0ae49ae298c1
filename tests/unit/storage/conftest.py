"""Fixtures for storage tests: real files under tmp_path, the in-memory store;
``place``: where one LedgerBackend keeps ledgers, once per backend
(backend_places.py: the file backend in tmp_path, the object backend on the
session's etcd and SeaweedFS)."""
from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest

from magnetar.metadata.memory import MemoryMetadataStore

from tests.helpers import opened_factories

from .backend_places import KINDS, Place

_prefixes = itertools.count()


@pytest.fixture
def store() -> MemoryMetadataStore:
    return MemoryMetadataStore()


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
async def factories(data_dir, store):
    """``make(**config)`` opens a factory on the shared dir and store; all are
    closed (or already abandoned) at teardown."""
    async with opened_factories(data_dir, store) as make:
        yield make


@pytest.fixture(params=KINDS)
async def place(request, tmp_path, monkeypatch):
    """A :class:`~.backend_places.Place` of each backend; its backends are closed at teardown."""
    if request.param == "file":
        spec = {"kind": "file", "data_dir": str(tmp_path / "data")}
    else:
        for name in list(os.environ):
            if name.startswith("AWS_"):  # the test SeaweedFS takes no keys
                monkeypatch.delenv(name)
        prefix = f"contract-{os.getpid()}-{next(_prefixes)}"
        spec = {"kind": "object", "etcd_url": request.getfixturevalue("etcd_server").store_url(prefix),
                "objects_url": request.getfixturevalue("seaweed").store_url(prefix),
                "layout": 1 if request.param == "object-v1" else 2}
    place = Place(spec)
    yield place
    await place.close()
