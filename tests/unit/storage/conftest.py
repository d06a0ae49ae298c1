"""Fixtures for storage tests: real files under tmp_path, the in-memory store."""
from __future__ import annotations

from pathlib import Path

import pytest

from magnetar.metadata.memory import MemoryMetadataStore
from magnetar.storage import ManagedLedgerFactory, StorageConfig


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
    made: list[ManagedLedgerFactory] = []

    def make(**config) -> ManagedLedgerFactory:
        factory = ManagedLedgerFactory(data_dir, store, StorageConfig(**config))
        made.append(factory)
        return factory

    yield make
    for factory in made:
        if not factory._closed:
            await factory.close()
        elif factory.backend.writer._thread.is_alive():
            await factory.backend.writer.close()
