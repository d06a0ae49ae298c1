"""What ``admin topics peek-messages`` shows: the messages of peeked entries.

The REST answer is one entry (see :mod:`.peek`); a batch entry holds several
messages, split here with their own keys and properties, as
``pulsar-admin`` does. Payloads that are UTF-8 text are shown as text,
anything else as base64 (``payloadEncoding`` says which).
"""
from __future__ import annotations

import base64
from typing import Any
from urllib.parse import unquote

from magnetar.protocol import ProtocolError
from magnetar.protocol.batch import decode_batch


def messages_of(payload: bytes, headers: dict[str, str]) -> list[dict[str, Any]]:
    """The messages of one peeked entry. Raises ProtocolError if a batch is malformed."""
    low = {k.lower(): v for k, v in headers.items()}
    entry_id = low.get("x-pulsar-message-id", "?")
    common = {"publishTime": low.get("x-pulsar-publish-time"), "producerName": low.get("x-pulsar-producer-name")}
    count = low.get("x-pulsar-num-batch-message")
    if count is None:
        props = {unquote(k[len("x-pulsar-property-"):]): unquote(v)
                 for k, v in headers.items() if k.lower().startswith("x-pulsar-property-")}
        key = low.get("x-pulsar-partition-key")
        return [{"messageId": entry_id, **common, "key": None if key is None else unquote(key),
                 "properties": props, **_payload(payload)}]
    try:
        batch = decode_batch(payload, int(count))
    except ValueError:
        raise ProtocolError(f"bad batch size header {count!r}") from None
    out = []
    for i, single in enumerate(batch):
        meta = single.metadata
        out.append({"messageId": f"{entry_id}:{i}", **common,
                    "key": meta.partition_key if meta.HasField("partition_key") else None,
                    "properties": {kv.key: kv.value for kv in meta.properties}, **_payload(single.payload)})
    return out


def _payload(data: bytes) -> dict[str, str]:
    try:
        return {"payload": data.decode("utf-8"), "payloadEncoding": "utf-8"}
    except UnicodeDecodeError:
        return {"payload": base64.b64encode(data).decode(), "payloadEncoding": "base64"}
