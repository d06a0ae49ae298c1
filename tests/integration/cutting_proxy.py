"""A TCP proxy on loopback that can cut a connection at a chosen frame.

Bytes flow unchanged between client and broker; frames from the broker are
decoded with Magnetar's own codec so a test can say "drop the connection
instead of delivering the next SEND_RECEIPT": the broker has appended the
entry, the client never hears of it and must retry.
"""
from __future__ import annotations

import socket
import threading

from magnetar.protocol.frames import FrameDecoder


class CuttingProxy:
    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.port = self.listener.getsockname()[1]
        self.cut_on_type: int | None = None
        self.cuts = 0
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"pulsar://127.0.0.1:{self.port}"

    def cut_next(self, command_type: int) -> None:
        """Close the connection instead of forwarding the next frame of this type."""
        with self._lock:
            self.cut_on_type = command_type

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            threading.Thread(target=self._pump, args=(client, upstream, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, True), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, from_broker: bool) -> None:
        decoder = FrameDecoder(max_frame_size=1 << 30)
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if from_broker:
                    # Forward frame by frame so a cut lands exactly on a boundary.
                    decoder.feed(data)
                    out = bytearray()
                    while (frame := decoder.next_frame_raw()) is not None:
                        cmd_type, raw = frame
                        with self._lock:
                            cut = self.cut_on_type is not None and cmd_type == self.cut_on_type
                            if cut:
                                self.cut_on_type = None
                                self.cuts += 1
                        if cut:
                            if out:
                                dst.sendall(bytes(out))
                            raise ConnectionAbortedError("cut by test")
                        out += raw
                    if out:
                        dst.sendall(bytes(out))
                else:
                    dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()

    def close(self) -> None:
        self._closed = True
        self.listener.close()
