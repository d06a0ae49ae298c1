"""Payload compression codecs of the protocol (client side).

The broker never decompresses: a compressed batch is stored and delivered as
the producer sent it. Clients use :func:`compress` / :func:`decompress`.
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
    raise ValueError(f"unsupported compression {pb.CompressionType.Name(kind)}")


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
        else:
            raise ProtocolError(f"unsupported compression type {kind}")
    except ProtocolError:
        raise
    except Exception as exc:
        raise ProtocolError(f"cannot decompress payload: {exc}") from None
    if kind != NONE and len(out) != uncompressed_size:
        raise ProtocolError(f"decompressed {len(out)} bytes, metadata says {uncompressed_size}")
    return out
