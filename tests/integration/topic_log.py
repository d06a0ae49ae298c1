"""Reading a whole topic back, to compare it with what was sent."""
from __future__ import annotations

import pulsar

from magnetar.client import AsyncClient, MessageId


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


async def read_topic_ours(url: str, topic: str, queue_size: int = 5000) -> list:
    """Every message of ``topic`` from the start, with our asyncio client (the
    blocking facade pays a thread hop per call: too slow for 100,000 messages)."""
    client = AsyncClient(url, operation_timeout_seconds=15)
    try:
        reader = await client.create_reader(topic, MessageId.earliest, receiver_queue_size=queue_size)
        out = []
        while await reader.has_message_available():
            out.append(await reader.read_next(10_000))
        return out
    finally:
        await client.close()


def sequence_report(got: list[int], total: int) -> str:
    """A short account of how ``got`` differs from ``0 .. total-1`` (empty if
    it does not): a failed comparison of 100,000-element lists prints them
    whole and hides what went wrong."""
    if got == list(range(total)):
        return ""
    seen: set[int] = set()
    duplicated = [n for n in got if n in seen or seen.add(n)]
    missing = sorted(set(range(total)) - seen)
    first_bad = next((i for i, n in enumerate(got) if n != i), len(got))
    window = got[max(0, first_bad - 3): first_bad + 8]
    return (f"{len(got)} stored for {total} sent; {len(missing)} missing (first {missing[:10]}), "
            f"{len(duplicated)} duplicated (first {duplicated[:10]}); first difference at index {first_bad}: "
            f"... {window} ...")
