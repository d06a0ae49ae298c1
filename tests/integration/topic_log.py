"""Reading a whole topic back, to compare it with what was sent."""
from __future__ import annotations

import pulsar


def read_topic(client_or_url, topic: str) -> list[bytes]:
    """Every message body of ``topic`` from the start, with the official client.

    Takes a ``pulsar.Client`` or a service URL (a client is opened and closed).
    """
    own = isinstance(client_or_url, str)
    client = pulsar.Client(client_or_url) if own else client_or_url
    try:
        reader = client.create_reader(topic, pulsar.MessageId.earliest)
        out = []
        while reader.has_message_available():
            out.append(reader.read_next(10_000).data())
        reader.close()
        return out
    finally:
        if own:
            client.close()
