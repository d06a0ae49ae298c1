"""Payload codecs: every codec round-trips, and a payload whose size does
not match its metadata is a ProtocolError, never short or padded bytes.

SNAPPY is raw snappy: the block pulsar-client (C++ snappy::Compress over a
byte array) writes, a varint of the uncompressed length then the block."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from magnetar.protocol import ProtocolError
from magnetar.protocol.compression import LZ4, SNAPPY, ZLIB, ZSTD, compress, decompress


@given(st.sampled_from([LZ4, ZLIB, ZSTD, SNAPPY]), st.binary(max_size=3000))
def test_round_trip(kind, data):
    assert decompress(kind, compress(kind, data), len(data)) == data


def test_snappy_is_the_raw_block_format():
    data = b"hello " * 1000
    block = compress(SNAPPY, data)
    assert block[:2] == bytes([0xF0, 0x2E])  # varint 6000: the raw format's preamble, no stream header
    assert decompress(SNAPPY, block, 6000) == data


@pytest.mark.parametrize("size", [5999, 6005, 0])
def test_snappy_size_mismatch_is_an_error(size):
    with pytest.raises(ProtocolError, match="snappy block of 6000 bytes"):
        decompress(SNAPPY, compress(SNAPPY, b"hello " * 1000), size)


@pytest.mark.parametrize("block", [b"", b"\xff\xff", compress(SNAPPY, b"hello " * 1000)[:-3]])
def test_snappy_malformed_is_an_error(block):
    with pytest.raises(ProtocolError):
        decompress(SNAPPY, block, 6000)
