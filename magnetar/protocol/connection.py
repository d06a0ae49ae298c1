"""The connection state machine: handshake rules on top of the frame codec.

No sockets here. The I/O shell feeds received bytes to
:meth:`Connection.receive_data` and gets frames back; it asks
:meth:`Connection.send` / :meth:`Connection.send_payload` for the bytes to write.

Rules enforced (a violation raises ProtocolError, after which the shell closes
the socket):

- the client's first frame is CONNECT, and CONNECT comes once;
- the server sends nothing before CONNECTED; the client sends nothing but
  CONNECT before it receives CONNECTED;
- after ``close`` nothing more is accepted.
"""
from __future__ import annotations

import enum

from . import magnetar_api_pb2 as pb
from .commands import Type, type_name
from .errors import ProtocolError
from .fast_send import SendCommandView
from .frames import BufferPool, Frame, FrameDecoder, encode_command, encode_payload_command


#: A client's incomplete frames of at least this many bytes are received
#: into one buffer of their size (see FrameDecoder's ``preallocate_from``).
CLIENT_PREALLOCATE_FROM = 64 * 1024
#: The same for a server, once it has sent CONNECTED (the peer passed the
#: handshake and authentication): a producer's large batch entries.
SERVER_PREALLOCATE_FROM = 64 * 1024


class Role(enum.Enum):
    CLIENT = "client"
    SERVER = "server"


class State(enum.Enum):
    AWAITING_CONNECT = "awaiting-connect"   # nothing exchanged yet
    CONNECTING = "connecting"               # CONNECT sent/received, CONNECTED not yet
    CONNECTED = "connected"
    CLOSED = "closed"


class Connection:
    """One side of a Pulsar binary-protocol connection, with no I/O."""

    def __init__(self, role: Role, max_frame_size: int | None = None, buffers: BufferPool | None = None) -> None:
        """``buffers``: where the decoder takes its receive buffers (a
        broker's, shared by its connections; by default the decoder's own)."""
        self.role = role
        self.state = State.AWAITING_CONNECT
        # A server reads plain SENDs without protobuf (``Frame.command`` is then a
        # SendCommandView): one per entry, the broker's hottest frame.
        fast = role is Role.SERVER
        # A client receives its large frames (fetch responses, batch entries)
        # into buffers of their exact size; a server only once the peer is
        # connected (see _check_send): before that, a peer that has not
        # authenticated must not make it allocate before the bytes arrive.
        prealloc = CLIENT_PREALLOCATE_FROM if role is Role.CLIENT else None
        # A server's handlers copy what they keep of a frame (an entry is
        # built anew): its receive chunks can be reused (FrameDecoder).
        self.decoder = (FrameDecoder(fast_send=fast, preallocate_from=prealloc, reuse_chunks=fast, buffers=buffers)
                        if max_frame_size is None
                        else FrameDecoder(max_frame_size, fast_send=fast, preallocate_from=prealloc,
                                          reuse_chunks=fast, buffers=buffers))
        self.peer_protocol_version = 0
        self.peer_supports_broker_entry_metadata = False

    def receive_data(self, data: bytes | None) -> list[Frame]:
        """Feed received bytes; return the whole frames now available, in
        order. ``None``: the bytes are already in (``decoder.received``)."""
        if self.state is State.CLOSED:
            raise ProtocolError("connection is closed")
        if data is not None:
            self.decoder.feed(data)
        frames: list[Frame] = []
        next_frame = self.decoder.next_frame
        # A server past CONNECT has no rule for a SEND (the hot frame): skip the check.
        sends_ok = self.role is Role.SERVER and self.state is not State.AWAITING_CONNECT
        next_sends = self.decoder.next_sends
        while True:
            if sends_ok:
                frames += next_sends()  # the run of SENDs ahead, in one call
            frame = next_frame()
            if frame is None:
                return frames
            if not sends_ok or type(frame.command) is not SendCommandView:
                self._on_receive(frame.command)
                sends_ok = self.role is Role.SERVER and self.state is not State.AWAITING_CONNECT
            frames.append(frame)

    def receive_data_in_runs(self, data: bytes) -> list:
        """:meth:`receive_data` for a client with many entries in flight:
        runs of plain SEND_RECEIPTs come out as ``(producer_id,
        first_sequence_id, last_sequence_id, count)`` tuples (one per stretch
        of one producer's consecutive sequence ids: see
        :mod:`.receipt_runs`), every other frame as a :class:`Frame` (a
        NamedTuple, so ``type(item) is tuple`` tells a run), all in stream
        order. Before CONNECTED, and on a server, it is :meth:`receive_data`."""
        if self.role is not Role.CLIENT or self.state is not State.CONNECTED:
            return self.receive_data(data)
        self.decoder.feed(data)
        out: list = []
        next_receipts, next_frame = self.decoder.next_receipts, self.decoder.next_frame
        while True:
            out += next_receipts()
            frame = next_frame()
            if frame is None:
                return out
            self._on_receive(frame.command)
            out.append(frame)

    def _on_receive(self, cmd: pb.BaseCommand) -> None:
        t = cmd.type
        if self.role is Role.SERVER:
            if self.state is State.AWAITING_CONNECT:
                if t != Type.CONNECT:
                    raise ProtocolError(f"expected CONNECT first, got {type_name(cmd)}")
                self.state = State.CONNECTING
                self.peer_protocol_version = cmd.connect.protocol_version
                self.peer_supports_broker_entry_metadata = (
                    cmd.connect.feature_flags.supports_broker_entry_metadata
                )
            elif t == Type.CONNECT:
                raise ProtocolError("CONNECT sent twice")
        else:
            if t == Type.CONNECTED:
                if self.state is not State.CONNECTING:
                    raise ProtocolError("CONNECTED without a CONNECT")
                self.state = State.CONNECTED
                self.peer_protocol_version = cmd.connected.protocol_version
            elif self.state is not State.CONNECTED and t not in (Type.ERROR, Type.AUTH_CHALLENGE):
                raise ProtocolError(f"{type_name(cmd)} before CONNECTED")

    def _check_send(self, cmd: pb.BaseCommand) -> None:
        if self.state is State.CLOSED:
            raise ProtocolError("connection is closed")
        t = cmd.type
        if self.role is Role.CLIENT:
            if self.state is State.AWAITING_CONNECT:
                if t != Type.CONNECT:
                    raise ProtocolError("the client must send CONNECT first")
                self.state = State.CONNECTING
            elif self.state is State.CONNECTING and t != Type.PING:
                raise ProtocolError(f"cannot send {type_name(cmd)} before CONNECTED")
        else:
            if t == Type.CONNECTED:
                if self.state is not State.CONNECTING:
                    raise ProtocolError("CONNECTED before the client's CONNECT")
                self.state = State.CONNECTED
                # Bounded by max_frame_size, and its buffers are reused once
                # nothing refers to them (BufferPool).
                self.decoder.preallocate_from = SERVER_PREALLOCATE_FROM
            elif self.state is not State.CONNECTED and t != Type.ERROR:
                raise ProtocolError(f"cannot send {type_name(cmd)} before CONNECTED")

    def send(self, cmd: pb.BaseCommand) -> bytes:
        """Bytes of a simple frame for ``cmd``."""
        self._check_send(cmd)
        return encode_command(cmd)

    def send_payload(self, cmd: pb.BaseCommand, block: bytes | memoryview) -> list[bytes | memoryview]:
        """Pieces of a payload frame (``cmd`` + a prebuilt block) for writelines."""
        self._check_send(cmd)
        return encode_payload_command(cmd, block)

    def close(self) -> None:
        self.state = State.CLOSED

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran: :meth:`send` raises ProtocolError from then on."""
        return self.state is State.CLOSED
