"""A receiver's drain after the run stops: it leaves once quiet while it has
every acknowledged send of its topic, not merely once quiet (a reader of a
hosts run left 3 s after its last message, an acknowledged one unread, its
topic loaded again elsewhere seconds before the end)."""
from __future__ import annotations

import threading
import time

from magnetar_chaos import consumers
from magnetar_chaos.history import History

T = "persistent://public/default/t"


class _Msg:
    def __init__(self, value: str) -> None:
        self.value = value

    def data(self) -> bytes:
        return self.value.encode()

    def redelivery_count(self) -> int:
        return 0


class _Reader:
    """Gives what is put in ``pending``; times out otherwise; always connected."""

    def __init__(self) -> None:
        self.pending: list[str] = []

    def read_next(self, timeout_ms: int):
        if self.pending:
            return _Msg(self.pending.pop(0))
        time.sleep(timeout_ms / 1000 / 10)
        raise TimeoutError

    def is_connected(self) -> bool:
        return True


class _Client:
    def close(self) -> None:
        pass


def test_a_drain_waits_for_every_acknowledged_send_of_its_topic(monkeypatch):
    history = History()
    reader = consumers.TopicReader("reader", "pulsar://x", T, history, 1)
    fake = _Reader()
    monkeypatch.setattr(consumers, "official_client", lambda: None)
    monkeypatch.setattr(consumers.TopicReader, "_connect", lambda self, pulsar, old: (_Client(), fake, self.service_url))
    monkeypatch.setattr(consumers.TopicReader, "QUIET_S", 0.2)
    for i in range(2):
        history.add("w", "ok", "send", topic=T, value=f"w:{i}")
    history.add("w", "ok", "send", topic=T + "-other", value="other:0")  # another topic's: not waited for
    fake.pending.append("w:0")
    worker = threading.Thread(target=reader.work)
    worker.start()
    reader.stop()
    time.sleep(1.0)  # quiet for five times QUIET_S: without w:1 it must not leave
    assert worker.is_alive()
    fake.pending.append("w:1")
    worker.join(5)
    assert not worker.is_alive()
    assert [op["value"] for op in history.ops if op["f"] == "receive"] == ["w:0", "w:1"]
