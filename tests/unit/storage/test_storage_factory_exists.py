"""ManagedLedgerFactory.exists: one read, no scan, no false positives for parent paths."""
from __future__ import annotations

import pytest


async def test_exists(factories):
    factory = factories()
    assert not await factory.exists("a/b/c")
    ml = await factory.open("a/b/c")
    assert await factory.exists("a/b/c")
    assert not await factory.exists("a/b")  # a parent path, not a managed ledger
    await ml.close()
    assert await factory.exists("a/b/c")  # stored, though not open
    await factory.delete("a/b/c")
    assert not await factory.exists("a/b/c")
    with pytest.raises(ValueError):
        await factory.exists("/bad")
