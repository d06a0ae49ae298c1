"""Fixtures for storage tests: real files under tmp_path, the in-memory store."""
from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Callable

import pytest

from magnetar.metadata.memory import MemoryMetadataStore
from magnetar.storage import ManagedLedgerFactory, StorageConfig


async def wait_until(condition: Callable[[], bool], timeout: float = 5.0, what: str = "condition") -> None:
    """Poll ``condition`` until true; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.002)


@pytest.fixture(name="wait_until")
def wait_until_fixture():
    return wait_until


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
        elif factory.writer._thread.is_alive():
            await factory.writer.close()
