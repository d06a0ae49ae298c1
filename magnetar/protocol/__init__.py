"""Sans-io Pulsar binary protocol: bytes in, commands out. No sockets, no asyncio.

- :mod:`.frames`      frame codec and the receive buffer
- :mod:`.connection`  handshake state machine tying the codec together
- :mod:`.commands`    building BaseCommand values by type
- :mod:`.batch`       batch payloads (SingleMessageMetadata runs)
- :mod:`.compression` payload codecs (clients only; the broker never decompresses)
- :mod:`.checksum`    CRC32C
- :mod:`.errors`      ProtocolError and the ServerError codes
- ``magnetar_api_pb2`` generated from ``proto/magnetar_api.proto`` (``make proto``)
"""
from . import magnetar_api_pb2 as pb
from .commands import Type, command
from .connection import Connection, Role, State
from .errors import ProtocolError, ServerError
from .frames import Frame, FrameDecoder, PayloadBlock

__all__ = [
    "pb", "Type", "command", "Connection", "Role", "State", "ProtocolError",
    "ServerError", "Frame", "FrameDecoder", "PayloadBlock",
]
