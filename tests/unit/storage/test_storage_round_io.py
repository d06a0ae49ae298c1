"""A group commit's per-ledger system calls in one call per round
(storage/file/round_io.py and its compiled twin _round.c): both give the
same results and errors on real files; a round writes all its ledgers with
one call, opens the files the pool had closed with one, and checks their
fence markers with one."""
from __future__ import annotations

import asyncio
import errno
import os

import pytest

from magnetar.metadata.memory import MemoryMetadataStore
from magnetar.storage import ManagedLedgerFactory, StorageConfig
from magnetar.storage.file import file_backend, round_io, segment_writes

try:
    from magnetar.storage.file import _round
except ImportError:  # pragma: no cover - make install builds it
    _round = None

TWINS = [pytest.param(round_io.write_all_python, round_io.reopen_python, round_io.exist_python, id="python")]
if _round is not None:
    TWINS.append(pytest.param(_round.write_all, _round.reopen, _round.exist, id="compiled"))


def test_the_build_has_the_compiled_calls():
    assert _round is not None, "make install builds magnetar/storage/file/_round.c"


@pytest.mark.parametrize("write_all, reopen, exist", TWINS)
def test_the_twins_write_open_and_stat_alike(tmp_path, write_all, reopen, exist):
    paths = [str(tmp_path / f"f{i}") for i in range(3)]
    fds = reopen([], paths + [str(tmp_path / "missing" / "x")], [os.O_RDWR | os.O_CREAT | os.O_APPEND] * 4)
    assert fds[3] == -errno.ENOENT and all(fd >= 0 for fd in fds[:3])
    assert not os.get_inheritable(fds[0])
    big = os.urandom(3 << 20)  # more than one write() may take at once into a pipe-less file: still whole
    closed_fd = os.open(os.devnull, os.O_RDONLY)
    os.close(closed_fd)
    assert write_all(fds[:3] + [closed_fd], [b"a", memoryview(b"bc"), big, b"lost"]) == [0, 0, 0, errno.EBADF]
    assert write_all([fds[0]], [b"d"]) == [0]
    assert [open(p, "rb").read() for p in paths] == [b"ad", b"bc", big]
    assert exist(paths + [str(tmp_path / "nope")]) == [True, True, True, False]
    again = reopen(fds[:3], paths[:1], [os.O_RDONLY])  # closes first, then opens
    assert again[0] >= 0 and os.pread(again[0], 2, 0) == b"ad"
    os.close(again[0])
    with pytest.raises(OSError):
        os.fstat(fds[1])  # closed by the call
    with pytest.raises(ValueError):
        reopen([], paths, [os.O_RDONLY])


async def test_a_round_of_many_ledgers_is_one_write_one_reopen_and_one_fence_check(tmp_path, monkeypatch):
    """50 ledgers in one round over a pool of 64 descriptors, 40 of them
    closed by the pool: one write call, one reopen call, one fence check
    (each a release of the GIL when compiled), and every entry reads back."""
    calls: dict[str, list[int]] = {"write_all": [], "reopen": [], "exist": []}

    def counting(name, real, size_of):
        def wrapper(*args):
            calls[name].append(size_of(*args))
            return real(*args)
        return wrapper

    factory = ManagedLedgerFactory(tmp_path, MemoryMetadataStore(), StorageConfig(max_open_ledger_files=64))
    try:
        mls = [await factory.open(f"t/ns/persistent/x{i}") for i in range(50)]
        await asyncio.gather(*(ml.append(b"first") for ml in mls))
        for ml in mls[:40]:  # close their descriptors: the round opens them again
            handle = ml._appends.current.handle
            with handle.pool._lock:
                handle.pool._open.pop(handle)
                fd, handle._fd = handle._fd, -1
            os.close(fd)
        monkeypatch.setattr(round_io, "write_all", counting("write_all", round_io.write_all, lambda fds, bufs: len(fds)))
        monkeypatch.setattr(round_io, "reopen", counting("reopen", round_io.reopen, lambda c, paths, f: len(paths)))
        monkeypatch.setattr(round_io, "exist", counting("exist", round_io.exist, len))
        rounds = factory.backend.writer.round_count
        await asyncio.gather(*(ml.append(b"second") for ml in mls))
        if factory.backend.writer.round_count == rounds + 1:  # one round took them all (the usual case)
            assert calls == {"write_all": [50], "reopen": [40], "exist": [50]}
        assert sum(calls["write_all"]) == 50 and sum(calls["reopen"]) == 40 and sum(calls["exist"]) == 50
        for ml in mls:
            assert [e.data for e in await ml.read_entries(ml.first_position(), 5)] == [b"first", b"second"]
    finally:
        await factory.close()


async def test_a_failed_segment_write_fails_that_ledger_only(tmp_path, monkeypatch):
    """One ledger's write fails (EIO) in a round of three: its batch is
    refused and it is fenced (the next append goes to a new ledger); the
    other two are receipted and read back."""
    factory = ManagedLedgerFactory(tmp_path, MemoryMetadataStore(), StorageConfig())
    try:
        mls = [await factory.open(f"t/ns/persistent/y{i}") for i in range(3)]
        victim = mls[1]._appends.current
        real = round_io.write_all

        def failing(fds, bufs):
            out = real(fds, bufs)
            victim_fd = victim.handle._fd
            return [errno.EIO if fd == victim_fd else err for fd, err in zip(fds, out)]

        monkeypatch.setattr(round_io, "write_all", failing)
        results = await asyncio.gather(*(ml.append(b"x") for ml in mls), return_exceptions=True)
        monkeypatch.setattr(round_io, "write_all", real)
        assert isinstance(results[1], Exception) and "write to ledger" in str(results[1])
        assert not isinstance(results[0], Exception) and not isinstance(results[2], Exception)
        assert victim.state.value == "fenced"
        await mls[1].append(b"after")
        assert mls[1]._appends.current is not victim
        for ml in (mls[0], mls[2]):
            assert [e.data for e in await ml.read_entries(ml.first_position(), 5)] == [b"x"]
    finally:
        await factory.close()


def test_the_segment_writes_module_uses_round_io():
    # The tests above patch round_io's attributes: the callers must look them up there.
    assert segment_writes.round_io is round_io and file_backend.fenced_among.__module__.endswith("ledger")
