"""A TCP proxy on loopback that can cut a connection at a chosen frame.

The chaos proxy (``magnetar_chaos/proxy.py``) whose broker-to-client
direction decodes frames with Magnetar's own codec, so a test can say "drop
the connection instead of delivering the next SEND_RECEIPT": the broker has
appended the entry, the client never hears of it and must retry.
"""
from __future__ import annotations

from magnetar_chaos.proxy import CutProxy
from magnetar.protocol.frames import FrameDecoder


class CuttingProxy(CutProxy):
    def __init__(self, target_port: int) -> None:
        self.cut_on_type: int | None = None
        self.cut_from_client_on_type: int | None = None
        super().__init__(target_port)

    def cut_next(self, command_type: int) -> None:
        """Close the connection instead of forwarding the next frame of this type (from the broker)."""
        with self._lock:
            self.cut_on_type = command_type

    def cut_next_from_client(self, command_type: int) -> None:
        """The same for the next frame of this type from the client: the broker never sees it."""
        with self._lock:
            self.cut_from_client_on_type = command_type

    def relay(self, from_broker: bool = False):
        decoder = FrameDecoder(max_frame_size=1 << 30)
        attr = "cut_on_type" if from_broker else "cut_from_client_on_type"

        def forward(data: bytes, dst) -> None:
            # Frame by frame, so a cut lands exactly on a boundary.
            decoder.feed(data)
            out = bytearray()
            while (frame := decoder.next_frame_raw()) is not None:
                cmd_type, raw = frame
                with self._lock:
                    wanted = getattr(self, attr)
                    cut = wanted is not None and cmd_type == wanted
                    if cut:
                        setattr(self, attr, None)
                        self.cuts += 1
                if cut:
                    if out:
                        dst.sendall(bytes(out))
                    raise ConnectionAbortedError("cut by test")
                out += raw
            if out:
                dst.sendall(bytes(out))

        return forward
