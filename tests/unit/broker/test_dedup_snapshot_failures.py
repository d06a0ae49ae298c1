"""A deduplication snapshot that the disk refuses (EIO from fsync, found by
the chaos harness's fsync-error fault) is reported in one line, not as a
traceback: it is expected under a failing disk and harmless, since the next
load replays the log from the last snapshot stored."""
from __future__ import annotations

import logging

import pytest

from magnetar.broker.topics.dedup import Deduplicator
from magnetar.metadata import MetadataError
from magnetar.metadata.memory import MemoryMetadataStore


class FailingStore(MemoryMetadataStore):
    def __init__(self, error: Exception) -> None:
        super().__init__()
        self.error = error

    async def put(self, *args, **kwargs):
        raise self.error


async def test_a_snapshot_the_disk_refuses_is_one_line_and_reaches_the_waiter(caplog):
    dedup = Deduplicator(FailingStore(MetadataError("metadata.db: disk I/O error")), "t", enabled=True)
    with caplog.at_level(logging.ERROR, logger="magnetar.broker.topics.dedup"):
        with pytest.raises(MetadataError):
            await dedup.snapshot()
        await dedup.close()
    failures = [r for r in caplog.records if "snapshot" in r.getMessage()]  # snapshot(); close(): its own, then the final
    assert len(failures) == 3 and all("disk I/O error" in r.getMessage() for r in failures)
    assert not any(r.exc_info for r in failures)


async def test_a_snapshot_failing_for_another_reason_keeps_its_traceback(caplog):
    dedup = Deduplicator(FailingStore(KeyError("a bug")), "t", enabled=True)
    with caplog.at_level(logging.ERROR, logger="magnetar.broker.topics.dedup"):
        with pytest.raises(KeyError):
            await dedup.snapshot()
    assert any(r.exc_info for r in caplog.records)
