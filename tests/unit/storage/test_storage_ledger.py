"""Segment files: framing, index, recovery of torn tails."""
from __future__ import annotations

import os
import struct

from magnetar.protocol.checksum import crc32c
import pytest

from magnetar.storage import CorruptLedgerError, LedgerFencedError
from magnetar.storage.file.ledger import Ledger, LedgerState
from magnetar.storage.file.ledger import index_path, log_path
from magnetar.storage.framing import frame


def make(tmp_path, ledger_id=7, entries=(b"a", b"bb" * 100, b"ccc")) -> Ledger:
    ledger = Ledger.create(tmp_path, ledger_id)
    ledger.write_entries(list(entries))
    ledger.sync()
    return ledger


def test_framing_round_trip(tmp_path):
    datas = [bytes([i % 256]) * (i + 1) for i in range(300)]
    ledger = make(tmp_path, entries=datas)
    assert ledger.entry_count == 300
    assert ledger.read_range(0, 299) == datas
    assert ledger.read(17) == datas[17]
    raw = log_path(tmp_path, 7).read_bytes()
    assert raw.startswith(struct.pack(">II", 1, crc32c(b"\x00")) + b"\x00")
    assert raw == b"".join(frame(d) for d in datas)
    assert ledger.size == len(raw)
    with pytest.raises(IndexError):
        ledger.read(300)


def test_empty_entries_are_refused(tmp_path):
    ledger = Ledger.create(tmp_path, 1)
    with pytest.raises(ValueError):
        ledger.write_entries([b"ok", b""])
    assert ledger.entry_count == 0


def test_seal_writes_index_and_reopen_uses_it(tmp_path):
    ledger = make(tmp_path)
    assert ledger.seal() == (3, ledger.size)
    assert ledger.state is LedgerState.CLOSED
    with pytest.raises(LedgerFencedError):
        ledger.write_entries([b"late"])
    ledger.close()
    assert index_path(tmp_path, 7).exists()
    again = Ledger.recover(tmp_path, 7)
    assert again.state is LedgerState.CLOSED
    assert again.read_range(0, 2) == [b"a", b"bb" * 100, b"ccc"]
    sealed = Ledger.open_sealed(tmp_path, 7, entries=3)
    assert sealed.read(2) == b"ccc"


def test_corrupt_index_falls_back_to_scan(tmp_path):
    ledger = make(tmp_path)
    ledger.seal()
    ledger.close()
    idx = index_path(tmp_path, 7)
    raw = bytearray(idx.read_bytes())
    raw[30] ^= 0xFF
    idx.write_bytes(bytes(raw))
    sealed = Ledger.open_sealed(tmp_path, 7, entries=3)
    assert sealed.read_range(0, 2) == [b"a", b"bb" * 100, b"ccc"]


def test_open_sealed_detects_missing_entries(tmp_path):
    ledger = make(tmp_path)
    ledger.close()
    with pytest.raises(CorruptLedgerError):
        Ledger.open_sealed(tmp_path, 7, entries=4)


def _recover_and_check(tmp_path, good_size, expected):
    ledger = Ledger.recover(tmp_path, 7)
    assert ledger.state is LedgerState.OPEN
    assert ledger.read_range(0, ledger.last_entry_id) == expected
    assert os.path.getsize(log_path(tmp_path, 7)) == good_size
    ledger.write_entries([b"after"])
    ledger.sync()
    assert ledger.read(len(expected)) == b"after"
    ledger.close()
    again = Ledger.recover(tmp_path, 7)
    assert again.read_range(0, again.last_entry_id) == expected + [b"after"]
    again.close()


@pytest.mark.parametrize(
    "tail",
    [
        b"garbage!",  # random bytes
        b"\x00" * 64,  # zero-filled tail (delayed allocation after power loss)
        frame(b"partial record")[:-3],  # torn record: short data
        frame(b"x")[:5],  # torn header
        struct.pack(">II", 1 << 30, 0),  # absurd length
    ],
)
def test_recovery_cuts_torn_tail(tmp_path, tail):
    ledger = make(tmp_path)
    good = ledger.size
    ledger.close()
    with open(log_path(tmp_path, 7), "ab") as f:
        f.write(tail)
    _recover_and_check(tmp_path, good, [b"a", b"bb" * 100, b"ccc"])


def test_recovery_cuts_record_with_bad_crc(tmp_path):
    ledger = make(tmp_path)
    last_start = ledger.size - len(frame(b"ccc"))
    ledger.close()
    path = log_path(tmp_path, 7)
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 0x01  # flip a bit in the last record's data
    path.write_bytes(bytes(raw))
    _recover_and_check(tmp_path, last_start, [b"a", b"bb" * 100])


def test_read_detects_corruption(tmp_path):
    ledger = make(tmp_path)
    fd = os.open(log_path(tmp_path, 7), os.O_WRONLY)
    os.pwrite(fd, b"Z", 8)  # the data byte of entry 0
    os.close(fd)
    with pytest.raises(CorruptLedgerError):
        ledger.read(0)
    assert ledger.read(2) == b"ccc"


def test_rollback_fences_and_cuts(tmp_path):
    ledger = make(tmp_path)
    size_after_two = ledger.size - len(frame(b"ccc"))
    ledger.rollback_to(2)
    assert ledger.state is LedgerState.FENCED
    assert ledger.entry_count == 2
    assert os.path.getsize(log_path(tmp_path, 7)) == size_after_two
    with pytest.raises(LedgerFencedError):
        ledger.write_entries([b"no"])
    assert ledger.seal() == (2, size_after_two)


def test_scan_of_large_file_across_chunks(tmp_path, monkeypatch):
    from magnetar.storage.file import ledger as ledger_mod

    monkeypatch.setattr(ledger_mod, "_SCAN_CHUNK", 100)  # force many refills
    datas = [os.urandom(37 + i % 90) for i in range(200)]
    ledger = make(tmp_path, entries=datas)
    ledger.close()
    again = Ledger.recover(tmp_path, 7)
    assert again.read_range(0, 199) == datas
    again.close()
