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


async def test_open_checks_a_name_not_stored_before_it_makes_it(factories):
    """``creating`` is awaited only when the recovery finds no record (the
    record read once, not by exists() first); what it raises goes up as it
    is, and nothing is made."""
    from magnetar.metadata import MetadataError

    factory = factories()
    asked = []

    async def refuse() -> None:
        asked.append("x")
        raise MetadataError("the namespace's record is unreadable (test)")

    with pytest.raises(MetadataError):
        await factory.open("a/b/new", creating=refuse)
    assert asked == ["x"]
    assert not await factory.exists("a/b/new")

    async def allow() -> None:
        asked.append("made")

    ml = await factory.open("a/b/new", creating=allow)
    await ml.close()
    ml = await factory.open("a/b/new", creating=refuse)  # stored: not asked
    assert asked == ["x", "made"]
    await ml.close()
