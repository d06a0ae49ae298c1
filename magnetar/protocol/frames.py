"""Frame codec: bytes <-> (command, payload block). No I/O.

Wire layout (all integers big-endian)::

    simple:   [total u32][cmd_size u32][BaseCommand]
    payload:  [total u32][cmd_size u32][BaseCommand]
              ([0x0e02][bem_size u32][BrokerEntryMetadata])?      MESSAGE only
              [0x0e01][crc32c u32][meta_size u32][MessageMetadata][payload]

``total`` counts every byte after itself. The CRC32C covers ``meta_size``,
the metadata and the payload.

The broker treats everything after the command as an opaque *payload block*:
a SEND's block is stored as received and later sent back verbatim behind a
MESSAGE command. :class:`PayloadBlock` parses the block lazily, so a broker
pays only for what it reads.
"""
from __future__ import annotations

import mmap
import struct
import sys
from typing import NamedTuple

from . import magnetar_api_pb2 as pb
from .checksum import crc32c
from .compiled import hot as _hot
from .errors import FrameTooLarge, ProtocolError
from .fast_send import parse_send
from .receipt_runs import receipt_runs as _receipt_runs

MAGIC_CRC32C = 0x0E01
MAGIC_BROKER_ENTRY_METADATA = 0x0E02

#: Pulsar's default max message size (5 MiB) is what CONNECTED advertises;
#: frames may carry that much payload plus command and metadata overhead.
DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024
FRAME_OVERHEAD = 64 * 1024

_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_U32U32 = struct.Struct(">II")
_CRC_HEADER = struct.Struct(">HI")
_CRC_META = struct.Struct(">II")


def encode_command(cmd: pb.BaseCommand) -> bytes:
    """A simple frame holding ``cmd``."""
    body = cmd.SerializeToString()
    return _U32U32.pack(len(body) + 4, len(body)) + body


def checksummed_block(metadata: bytes, payload: bytes | memoryview) -> bytes:
    """The ``[0x0e01][crc][meta_size][metadata][payload]`` block of a SEND."""
    tail = _U32.pack(len(metadata)) + metadata + bytes(payload)
    return _CRC_HEADER.pack(MAGIC_CRC32C, crc32c(tail)) + tail


def broker_entry_metadata_block(bem: bytes) -> bytes:
    """The ``[0x0e02][size][BrokerEntryMetadata]`` prefix."""
    return _U16.pack(MAGIC_BROKER_ENTRY_METADATA) + _U32.pack(len(bem)) + bem


def encode_payload_command(cmd: pb.BaseCommand, block: bytes | memoryview) -> list[bytes | memoryview]:
    """A payload frame: ``cmd`` followed by an already built payload block.

    Returned as pieces for ``transport.writelines`` so the block (often a stored
    entry) is never copied into a new buffer.
    """
    body = cmd.SerializeToString()
    return [_U32U32.pack(4 + len(body) + len(block), len(body)) + body, block]


def encode_send(cmd: pb.BaseCommand, metadata: bytes, payload: bytes | memoryview) -> bytes:
    """A whole SEND frame with its checksum (client side)."""
    return b"".join(encode_payload_command(cmd, checksummed_block(metadata, payload)))


class PayloadBlock(NamedTuple):
    """The bytes after a payload command, parsed on demand.

    ``raw`` is the whole block. A block may start with broker entry metadata
    (MESSAGE); the checksummed part follows. Accessors raise ProtocolError
    when the block is malformed. (A tuple: one per entry, and the compiled
    decoder builds it without a Python call.)
    """

    raw: memoryview
    #: The checksum's verdict when the decoder already checked it (1 matches,
    #: 0 does not; the compiled SEND path does, on a block that starts with
    #: the 0x0e01 magic, so ``raw`` is then ``checksummed``), -1 when not
    #: checked yet.
    checked: int = -1

    def _split(self) -> tuple[memoryview | None, memoryview]:
        raw = self.raw
        if len(raw) >= 6 and _U16.unpack_from(raw, 0)[0] == MAGIC_BROKER_ENTRY_METADATA:
            (size,) = _U32.unpack_from(raw, 2)
            if 6 + size > len(raw):
                raise ProtocolError("broker entry metadata overruns the frame")
            return raw[6 : 6 + size], raw[6 + size :]
        return None, raw

    @property
    def broker_entry_metadata(self) -> pb.BrokerEntryMetadata | None:
        bem, _ = self._split()
        if bem is None:
            return None
        msg = pb.BrokerEntryMetadata()
        _parse(msg, bem)
        return msg

    @property
    def checksummed(self) -> memoryview:
        """The block from the 0x0e01 magic on (what a SEND stores), or the
        metadata-size field on if the peer did not checksum."""
        return self._split()[1]

    def _sections(self) -> tuple[int | None, memoryview, memoryview, memoryview]:
        part = self.checksummed
        crc: int | None = None
        if len(part) >= 2 and _U16.unpack_from(part, 0)[0] == MAGIC_CRC32C:
            if len(part) < 6:
                raise ProtocolError("truncated checksum header")
            crc = _U32.unpack_from(part, 2)[0]
            part = part[6:]
        if len(part) < 4:
            raise ProtocolError("payload frame without metadata size")
        (meta_size,) = _U32.unpack_from(part, 0)
        if 4 + meta_size > len(part):
            raise ProtocolError(f"metadata size {meta_size} overruns the frame")
        return crc, part, part[4 : 4 + meta_size], part[4 + meta_size :]

    def verify_checksum(self) -> bool:
        """True if there is no checksum or it matches; False on a mismatch.

        Raises ProtocolError when the block is malformed."""
        if self.checked >= 0:
            return self.checked == 1
        raw = self.raw
        if len(raw) >= 10 and raw[0] == 0x0E and raw[1] == 0x01:
            # A SEND's block: [0x0e01][crc][meta_size]... (once per entry: no section views)
            crc, meta_size = _CRC_META.unpack_from(raw, 2)
            if 10 + meta_size <= len(raw):
                return crc32c(raw[6:]) == crc
        crc, covered, _, _ = self._sections()
        return crc is None or crc32c(covered) == crc

    @property
    def metadata_bytes(self) -> memoryview:
        return self._sections()[2]

    @property
    def metadata(self) -> pb.MessageMetadata:
        msg = pb.MessageMetadata()
        _parse(msg, self._sections()[2])
        return msg

    @property
    def payload(self) -> memoryview:
        return self._sections()[3]


class Frame(NamedTuple):
    """One decoded frame: the command and, for SEND/MESSAGE, its payload block.

    (A tuple: a broker builds one per entry.)"""

    command: pb.BaseCommand
    block: PayloadBlock | None = None


_new_frame = tuple.__new__
if _hot is not None:
    _hot.register_frame_types(Frame, PayloadBlock)


def _parse(msg, data: bytes | memoryview) -> None:
    try:
        msg.ParseFromString(data)
    except Exception as exc:  # protobuf's DecodeError and friends
        raise ProtocolError(f"cannot parse {type(msg).__name__}: {exc}") from None
    if not msg.IsInitialized():
        missing = ", ".join(msg.FindInitializationErrors())
        raise ProtocolError(f"{type(msg).__name__} lacks required fields: {missing}")


def send_frame_python(data: bytes, start: int, end: int) -> Frame | None:
    """The whole frame ``data[start:end]`` as a Frame if it is a plain SEND
    (see :func:`.fast_send.parse_send`), else None: then :func:`decode_frame`
    decides. Its block is a view of ``data``, its checksum not checked yet
    (the compiled twin, ``_hot.send_frame``, checks it while it is there)."""
    # [total][cmd_size][08 06 ...]: maybe a SEND; parse it by hand if it is a plain one.
    if end - start > 12 and data[start + 9] == 0x06 and data[start + 8] == 0x08:
        cmd_end = start + 8 + _U32.unpack_from(data, start + 4)[0]
        if cmd_end < end:
            send = parse_send(data, start + 8, cmd_end)
            if send is not None:
                return _new_frame(Frame, (send, PayloadBlock(memoryview(data)[cmd_end:end])))
    return None


def send_frames_python(data: bytes, start: int, max_frame_size: int) -> tuple[list[Frame], int]:
    """The plain SEND frames lying whole in ``data[start:]``, one after the
    other, and the position after the last; it stops before the first frame
    that is incomplete, outside ``4..max_frame_size``, or not a plain SEND."""
    frames: list[Frame] = []
    pos, size = start, len(data)
    while 0 <= pos and size - pos >= 4:
        (total,) = _U32.unpack_from(data, pos)
        end = pos + 4 + total
        if not 4 <= total <= max_frame_size or end > size:
            break
        frame = send_frame_python(data, pos, end)
        if frame is None:
            break
        frames.append(frame)
        pos = end
    return frames, pos


_send_frame = send_frame_python if _hot is None else _hot.send_frame
_send_frames = send_frames_python if _hot is None else _hot.send_frames


def decode_frame(frame: memoryview) -> Frame:
    """Decode one frame body (the bytes after ``total``)."""
    if len(frame) < 4:
        raise ProtocolError("frame shorter than its command size field")
    (cmd_size,) = _U32.unpack_from(frame, 0)
    if cmd_size == 0 or 4 + cmd_size > len(frame):
        raise ProtocolError(f"command size {cmd_size} does not fit a {len(frame)}-byte frame")
    cmd = pb.BaseCommand()
    _parse(cmd, frame[4 : 4 + cmd_size])
    rest = frame[4 + cmd_size :]
    return Frame(cmd, PayloadBlock(rest) if len(rest) else None)


#: The scratch buffer :meth:`FrameDecoder.receive_buffer` offers outside a
#: large frame (asyncio's own receive size).
RECEIVE_SCRATCH = 256 * 1024
#: Large frames' buffers kept for reuse (see FrameDecoder), and their size step.
SPARE_BUFFERS = 3
SPARE_STEP = 1024 * 1024


class BufferPool:
    """Receive buffers reused once nothing refers to them: one decoder's
    (a client's large frames), or every connection's of a broker (one
    loop: decoders take a buffer only between reads, so a few serve them
    all and no connection keeps memory of its own between its reads).

    :meth:`take` returns a kept buffer of at least the size asked that no
    one refers to (its reference count: no view of it, no frame, no slice
    left anywhere), else a new one of the size rounded up to ``step``; at
    most ``keep`` are kept, the oldest dropped first (a dropped one lives
    on while its frames do). A buffer taken is never written by the pool's
    users while any frame of it is alive, since they hold it while they
    fill it and hand out only read-only views.

    ``mapped``: new buffers are anonymous maps (``mmap``), whose pages are
    taken only as bytes are written into them, not bytearrays (zero-filled
    when made): a server's choice, where a peer may declare a large frame
    and send a few bytes of it (it then costs the pages it filled, not the
    size it declared)."""

    __slots__ = ("keep", "step", "mapped", "_buffers")

    def __init__(self, keep: int = SPARE_BUFFERS, step: int = SPARE_STEP, *, mapped: bool = False) -> None:
        self.keep = keep
        self.step = step
        self.mapped = mapped
        self._buffers: list = []

    def take(self, size: int) -> bytearray | mmap.mmap:
        buffers = self._buffers
        for buffer in buffers:
            # Referenced only by the list, the loop variable and getrefcount's argument.
            if len(buffer) >= size and sys.getrefcount(buffer) <= 3:
                return buffer
        size = -(-size // self.step) * self.step
        buffer = mmap.mmap(-1, size) if self.mapped else bytearray(size)
        buffers.append(buffer)
        if len(buffers) > self.keep:
            del buffers[0]
        return buffer

    def __len__(self) -> int:
        return len(self._buffers)


class FrameDecoder:
    """A receive buffer: feed bytes in any chunking, take whole frames out.

    Frames that arrive whole inside one received chunk are returned as views
    of that (immutable) chunk, with no copy. Bytes of an incomplete frame are
    gathered in a bytearray (amortised O(n)) and frozen into one bytes object
    once a frame is complete, so a large frame that trickles in is copied
    once, not once per chunk.

    With ``preallocate_from``, an incomplete frame that declares at least
    that many bytes is gathered instead into one buffer of its exact size,
    allocated when its size is read, and handed out as a read-only view of
    that buffer: no regrowth and no final copy (a client's 4 MiB fetch
    responses). The decoder keeps the last few such buffers and receives a
    later large frame into one of them only once nothing refers to it any
    more (no view of the frame it held is left anywhere: its reference
    count says so), so a frame handed out is never written again, and a
    reader that drops each response before the next but one takes no
    fresh memory per frame (a fresh buffer is zero-filled and faulted in
    page by page). The caller chooses: a server sets it only once a peer
    has connected (a peer could otherwise make it allocate a frame's size
    before the bytes arrive), and may set it at any time between frames.

    Large frames' buffers come from ``buffers`` (a :class:`BufferPool`,
    this decoder's own if not given). With ``reuse_chunks`` (a broker's
    choice: its handlers copy what they keep of a frame, so frames are
    dropped soon after they are taken), the bytes :meth:`receive_buffer`
    takes outside a large frame go into a buffer of that pool too, held
    only until :meth:`received`, and the frames found whole in it are views
    of it, not of a copy of it. Without it each received chunk is copied
    into a fresh bytes object, which a frame may keep alive at the chunk's
    size, not :data:`RECEIVE_SCRATCH` (a client's consumers keep messages
    queued).

    Raises :class:`FrameTooLarge` as soon as a frame header declares more than
    ``max_frame_size`` bytes, so a peer cannot make us buffer gigabytes.
    """

    def __init__(self, max_frame_size: int = DEFAULT_MAX_MESSAGE_SIZE + FRAME_OVERHEAD, *,
                 fast_send: bool = False, preallocate_from: int | None = None,
                 reuse_chunks: bool = False, buffers: BufferPool | None = None) -> None:
        self.max_frame_size = max_frame_size
        self.preallocate_from = preallocate_from
        # A large frame being received (preallocate_from): its buffer, the bytes
        # filled, and what arrived after it (the next frames' start).
        self._big: memoryview | None = None  # the frame's exact size, over a buffer of _buffers
        self._big_filled = 0
        self._buffers = buffers if buffers is not None else BufferPool()
        self._reuse_chunks = reuse_chunks
        self._after: bytearray | None = None
        self._scratch: bytearray | None = None  # receive_buffer's, for bytes that are not a large frame's
        self._into_big = False
        #: Decode plain SEND commands with :func:`.fast_send.parse_send` (a
        #: broker's per-entry path): their ``Frame.command`` is then a
        #: :class:`.fast_send.SendCommandView`, not a protobuf message.
        self.fast_send = fast_send
        self._data: bytes = b""
        self._pos = 0
        self._pending: bytearray | None = None

    def feed(self, data: bytes) -> None:
        big = self._big
        if big is not None:
            if self._after is not None:
                self._after += data
                return
            filled = self._big_filled
            n = min(len(data), len(big) - filled)
            big[filled:filled + n] = memoryview(data)[:n]
            self._big_filled = filled + n
            if n < len(data):
                self._after = bytearray(memoryview(data)[n:])
            return
        if self._pending is None and self._pos >= len(self._data):
            self._data, self._pos = bytes(data), 0  # no copy for bytes
            return
        if self._pending is None:
            self._pending = bytearray(memoryview(self._data)[self._pos :])
            self._data, self._pos = b"", 0
        self._pending += data

    def receive_buffer(self) -> memoryview:
        """Where the next received bytes may go (a BufferedProtocol's
        ``get_buffer``): the rest of the large frame being received, so the
        socket fills it with no copy, else a scratch buffer. Call
        :meth:`received` with the count written before anything else."""
        big = self._big
        if big is not None and self._after is None:
            self._into_big = True
            return memoryview(big)[self._big_filled:]
        self._into_big = False
        if self._reuse_chunks:
            self._scratch = self._buffers.take(RECEIVE_SCRATCH)  # held until received()
        elif self._scratch is None:
            self._scratch = bytearray(RECEIVE_SCRATCH)
        return memoryview(self._scratch)[:RECEIVE_SCRATCH]

    def received(self, n: int) -> None:
        """``n`` bytes were written at the start of the buffer
        :meth:`receive_buffer` returned."""
        if self._into_big:
            self._big_filled += n
        elif not self._reuse_chunks:
            self.feed(bytes(memoryview(self._scratch)[:n]))  # frames hold views of their chunk: not the scratch
        else:
            chunk, self._scratch = self._scratch, None
            if self._big is None and self._pending is None and self._pos >= len(self._data):
                # Frames are views of the chunk itself: the pool does not
                # hand it out again while any is left (nor while _data is).
                self._data, self._pos = memoryview(chunk)[:n].toreadonly(), 0
            else:
                self.feed(memoryview(chunk)[:n])  # copied into the frame being gathered: the chunk is free again

    @property
    def buffered(self) -> int:
        return (len(self._data) - self._pos + (len(self._pending) if self._pending is not None else 0)
                + (self._big_filled if self._big is not None else 0)
                + (len(self._after) if self._after is not None else 0))

    def _frame_bounds(self) -> tuple[int, int] | None:
        """(start, end) of the next whole frame in ``_data``, or None."""
        big = self._big
        if big is not None:
            if self._big_filled < len(big):
                return None
            # Whole: hand it out as a read-only view; what came after it is next.
            self._data, self._pos = memoryview(big).toreadonly(), len(big)
            self._big, self._big_filled, self._pending, self._after = None, 0, self._after, None
            return 0, len(big)
        pending = self._pending
        if pending is not None:
            if len(pending) < 4:
                return None
            (total,) = _U32.unpack_from(pending, 0)
            self._check_size(total)
            if len(pending) < 4 + total:
                self._preallocate(pending, 0, total)
                return None
            self._data, self._pos, self._pending = bytes(pending), 0, None
        data, pos = self._data, self._pos
        if len(data) - pos < 4:
            if pos < len(data):
                self._pending = bytearray(memoryview(data)[pos:])
            self._data, self._pos = b"", 0  # all taken: its chunk is no longer the decoder's to hold
            return None
        (total,) = _U32.unpack_from(data, pos)
        self._check_size(total)
        end = pos + 4 + total
        if len(data) < end:
            if not self._preallocate(data, pos, total):
                self._pending = bytearray(memoryview(data)[pos:])
            self._data, self._pos = b"", 0
            return None
        self._pos = end
        return pos, end

    def _preallocate(self, data, pos: int, total: int) -> bool:
        """Start receiving the incomplete frame at ``data[pos:]`` (of ``total``
        bytes after its size field) into a buffer of its exact size, when
        ``preallocate_from`` says so; whether it did."""
        if self.preallocate_from is None or 4 + total < self.preallocate_from:
            return False
        have = memoryview(data)[pos:]
        big = memoryview(self._buffers.take(4 + total))[:4 + total]
        big[:len(have)] = have
        self._big, self._big_filled, self._after = big, len(have), None
        self._pending = None
        return True

    def _check_size(self, total: int) -> None:
        if total > self.max_frame_size:
            raise FrameTooLarge(f"frame of {total} bytes exceeds the {self.max_frame_size}-byte limit")
        if total < 4:
            raise ProtocolError(f"frame size {total} is too small")

    def next_frame(self) -> Frame | None:
        """The next whole frame, or None until more bytes arrive."""
        data = self._data
        start = self._pos
        if self._pending is None and len(data) - start >= 10:
            # The common case inlined (a frame that arrived whole): _frame_bounds' first branch.
            (total,) = _U32.unpack_from(data, start)
            end = start + 4 + total
            if end > len(data) or not 4 <= total <= self.max_frame_size:
                bounds = self._frame_bounds()  # incomplete or bad: the general path decides
                if bounds is None:
                    return None
                start, end = bounds
                data = self._data
            else:
                self._pos = end
        else:
            bounds = self._frame_bounds()
            if bounds is None:
                return None
            start, end = bounds
            data = self._data
        if self.fast_send:
            frame = _send_frame(data, start, end)
            if frame is not None:
                return frame
        return decode_frame(memoryview(data)[start + 4 : end])

    def next_sends(self) -> list[Frame]:
        """The plain SEND frames lying whole at the head of the buffer, in
        order; often none. One call takes a received chunk's run of SENDs (an
        unbatched producer's chunk holds dozens). Whatever follows them (another
        command, a partial frame, a bad size) is left for :meth:`next_frame`,
        which decodes or refuses it as before. Always none without ``fast_send``.
        """
        if self._pending is not None or not self.fast_send:
            return []
        frames, self._pos = _send_frames(self._data, self._pos, self.max_frame_size)
        return frames

    def next_receipts(self) -> list[tuple[int, int, int, int]]:
        """The plain SEND_RECEIPTs lying whole at the head of the buffer, as
        runs ``(producer_id, first_sequence_id, last_sequence_id, count)``
        (:func:`.receipt_runs.receipt_runs`); often none. Whatever follows
        them is left for :meth:`next_frame`, as with :meth:`next_sends`."""
        if self._pending is not None:
            return []
        runs, self._pos = _receipt_runs(self._data, self._pos, self.max_frame_size)
        return runs

    def next_frame_raw(self) -> tuple[int, bytes] | None:
        """The next whole frame as (command type, the frame's exact bytes), or None.

        For proxies and tools that forward frames untouched.
        """
        bounds = self._frame_bounds()
        if bounds is None:
            return None
        start, end = bounds
        raw = bytes(self._data[start:end])
        return decode_frame(memoryview(raw)[4:]).command.type, raw
