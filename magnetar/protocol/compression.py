"""Payload compression codecs of the protocol (client side).

The broker never decompresses: a compressed batch is stored and delivered as
the producer sent it. Clients use :func:`compress` / :func:`decompress`.

SNAPPY is raw snappy (the block format with its length preamble, not the
framed stream format), as the official clients write it; it goes through
pyarrow's snappy codec, so it needs pyarrow (the Spark connector and the
test extra have it): without it a SNAPPY payload is a ProtocolError saying so.
"""
from __future__ import annotations

import zlib

from . import magnetar_api_pb2 as pb
from .errors import ProtocolError

NONE, LZ4, ZLIB, ZSTD, SNAPPY = pb.NONE, pb.LZ4, pb.ZLIB, pb.ZSTD, pb.SNAPPY


def compress(kind: int, data: bytes) -> bytes:
    if kind == NONE:
        return data
    if kind == LZ4:
        import lz4.block

        return lz4.block.compress(data, store_size=False)
    if kind == ZLIB:
        return zlib.compress(data)
    if kind == ZSTD:
        import zstandard

        return zstandard.ZstdCompressor().compress(data)
    if kind == SNAPPY:
        return _snappy().compress(data, asbytes=True)
    raise ValueError(f"unsupported compression {pb.CompressionType.Name(kind)}")


def _snappy_length(data) -> int:
    """The uncompressed length a raw snappy block starts with (a varint); -1 if malformed."""
    view = memoryview(data)
    value = shift = 0
    for i in range(min(len(view), 5)):
        value |= (view[i] & 0x7F) << shift
        if view[i] < 0x80:
            return value
        shift += 7
    return -1


def _snappy():
    """pyarrow's raw snappy codec; ProtocolError when pyarrow is missing."""
    try:
        import pyarrow
    except ImportError:
        raise ProtocolError("SNAPPY payloads need pyarrow (pip install pyarrow)") from None
    return pyarrow.Codec("snappy")


def decompress(kind: int, data: bytes, uncompressed_size: int) -> bytes:
    """Decompress ``data``; raises ProtocolError on corrupt input or a size mismatch."""
    try:
        if kind == NONE:
            out = bytes(data)
        elif kind == LZ4:
            import lz4.block

            out = lz4.block.decompress(bytes(data), uncompressed_size=uncompressed_size)
        elif kind == ZLIB:
            out = zlib.decompress(bytes(data))
        elif kind == ZSTD:
            import zstandard

            out = zstandard.ZstdDecompressor().decompress(bytes(data), max_output_size=uncompressed_size)
        elif kind == SNAPPY:
            # Arrow's codec sizes its output by decompressed_size and returns all
            # of it, even when the data holds less: check the block's own length first.
            length = _snappy_length(data)
            if length != uncompressed_size:
                raise ProtocolError("malformed snappy block" if length < 0 else
                                    f"snappy block of {length} bytes, metadata says {uncompressed_size}")
            out = _snappy().decompress(data, decompressed_size=uncompressed_size, asbytes=True)
        else:
            raise ProtocolError(f"unsupported compression type {kind}")
    except ProtocolError:
        raise
    except Exception as exc:
        raise ProtocolError(f"cannot decompress payload: {exc}") from None
    if kind != NONE and len(out) != uncompressed_size:
        raise ProtocolError(f"decompressed {len(out)} bytes, metadata says {uncompressed_size}")
    return out
