"""The per-topic series at ``/metrics``, written straight to text.

With 100,000 loaded topics they are about 1.4 million samples. Built as
prometheus_client sample objects and formatted by ``generate_latest`` they
took 65 s of the event loop per scrape, and nothing else ran meanwhile.
Here each topic's label text is made once and kept while the topic stays
loaded (its name and namespace never change), a sample is one string
format, and the text leaves in chunks: the event loop runs other work
between two chunks, so a scrape of many topics delays traffic by one chunk
at a time, not by the whole scrape.

Which series, with their names, labels and help: Pulsar's per-topic gauges
and counters (:data:`.pulsar_metrics.GAUGES`, :data:`.pulsar_metrics.COUNTERS`,
labels ``cluster``, ``namespace``, ``topic``), its per-subscription ones
(:data:`.pulsar_metrics.SUB_GAUGES`, the out counters, plus a
``subscription`` label), and Magnetar's ``magnetar_topic_*`` (label
``topic``) and ``magnetar_subscription_backlog_entries``. Only with
``expose_topic_level_metrics_in_prometheus`` on (the caller's check).
"""
from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, AsyncIterator

from prometheus_client.utils import floatToGoString

from .pulsar_metrics import COUNTERS, GAUGES, SUB_COUNTERS, SUB_GAUGES, PulsarCollector

if TYPE_CHECKING:
    from magnetar.broker.server.server import Broker

#: Topics per chunk: the event loop runs other work between two chunks.
CHUNK_TOPICS = 2000

#: (name, type, help) of Magnetar's per-topic series, in the order written.
#: A counter's samples carry ``_total``, as prometheus_client writes them.
MAGNETAR_SERIES = (
    ("magnetar_topic_messages_in_total", "counter", "Messages published"),
    ("magnetar_topic_bytes_in_total", "counter", "Bytes stored"),
    ("magnetar_topic_storage_bytes", "gauge", "Bytes in storage"),
    ("magnetar_topic_producers", "gauge", "Attached producers"),
)


def value_text(value: float) -> str:
    """A sample value as prometheus_client writes it (``3.0``, ``1.5e+06``)."""
    if type(value) is int and -1_000_000 < value < 1_000_000:
        return f"{value}.0"  # what float's repr gives below Go's exponent switch
    return floatToGoString(value)


def label_text(value: str) -> str:
    """A label value, escaped for the text format."""
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


class TopicExposition:
    """Writes the per-topic series of a broker; keeps each loaded topic's
    label text between scrapes. ``pulsar``: the collector whose rates (between
    two scrapes) the Pulsar gauges report."""

    def __init__(self, broker: "Broker", pulsar: PulsarCollector) -> None:
        self.broker = broker
        self.pulsar = pulsar
        #: topic name -> (Pulsar's label text, Magnetar's label text)
        self._labels: dict[str, tuple[str, str]] = {}

    def _labels_of(self, name: str, namespace: str) -> tuple[str, str]:
        labels = self._labels.get(name)
        if labels is None:
            topic = label_text(name)
            labels = self._labels[name] = (
                f'cluster="{label_text(self.broker.config.cluster_name)}",namespace="{label_text(namespace)}",'
                f'topic="{topic}"', f'topic="{topic}"')
        return labels

    async def chunks(self) -> AsyncIterator[bytes]:
        """The series' text, a chunk at a time (every family's samples
        together, as the format requires). Yields the event loop between
        chunks; topics loaded or unloaded meanwhile are seen at the next scrape."""
        service = self.broker.service
        loaded = list(service.topics.items()) if service else []
        now = asyncio.get_running_loop().time()
        rows = []  # (Pulsar labels, Magnetar labels, gauge texts, [(sub label, sub gauge texts, sub counter texts)],
        #            Magnetar's values' texts, counter texts)
        for start in range(0, len(loaded), CHUNK_TOPICS):
            for name, topic in loaded[start:start + CHUNK_TOPICS]:
                labels = self._labels.get(name)
                if labels is None:
                    labels = self._labels_of(name, topic.name.namespace_name)
                _, _, values, sub_rows, counters = self.pulsar.row(topic, now, name)
                subs = [(f'{labels[0]},subscription="{label_text(sub)}"', [value_text(v) for v in gauges],
                         [value_text(v) for v in sub_counters]) for sub, gauges, sub_counters in sub_rows]
                rows.append((labels[0], labels[1], [value_text(v) for v in values], subs,
                             (value_text(topic.msg_in), value_text(topic.bytes_in),
                              value_text(topic.ledger.total_size), value_text(len(topic.producers))),
                             [value_text(v) for v in counters]))
            await asyncio.sleep(0)
        names = {name for name, _ in loaded}
        self.pulsar.keep_only(names)
        if len(self._labels) > len(names):
            for gone in set(self._labels) - names:
                del self._labels[gone]
        with_subs = [r for r in rows if r[3]]

        for i, (metric, doc) in enumerate(GAUGES):
            async for chunk in _family(f"# HELP {metric} {doc}\n# TYPE {metric} gauge\n", rows,
                                       lambda part: [f"{metric}{{{r[0]}}} {r[2][i]}\n" for r in part]):
                yield chunk
        for i, (metric, doc) in enumerate(COUNTERS):
            j = SUB_COUNTERS.index(metric) if metric in SUB_COUNTERS else -1
            async for chunk in _family(
                    f"# HELP {metric} {doc}\n# TYPE {metric} counter\n", rows,
                    lambda part: [f"{metric}{{{r[0]}}} {r[5][i]}\n" for r in part]
                    + ([f"{metric}{{{s[0]}}} {s[2][j]}\n" for r in part for s in r[3]] if j >= 0 else [])):
                yield chunk
        for i, (metric, doc) in enumerate(SUB_GAUGES):
            async for chunk in _family(f"# HELP {metric} {doc}\n# TYPE {metric} gauge\n", with_subs,
                                       lambda part: [f"{metric}{{{s[0]}}} {s[1][i]}\n" for r in part for s in r[3]]):
                yield chunk
        for j, (metric, kind, doc) in enumerate(MAGNETAR_SERIES):
            async for chunk in _family(f"# HELP {metric} {doc}\n# TYPE {metric} {kind}\n", rows,
                                       lambda part: [f"{metric}{{{r[1]}}} {r[4][j]}\n" for r in part]):
                yield chunk
        async for chunk in _family(
                "# HELP magnetar_subscription_backlog_entries Entries not yet acknowledged\n"
                "# TYPE magnetar_subscription_backlog_entries gauge\n", with_subs,
                lambda part: [f'magnetar_subscription_backlog_entries{{{r[1]}{s[0][len(r[0]):]}}} {s[1][0]}\n'
                              for r in part for s in r[3]]):
            yield chunk


async def _family(head: str, rows: list, lines) -> AsyncIterator[bytes]:
    """One family's text: ``head`` then ``lines(part)`` for each chunk of ``rows``."""
    text = head
    for start in range(0, len(rows), CHUNK_TOPICS):
        text += "".join(lines(rows[start:start + CHUNK_TOPICS]))
        yield text.encode()
        text = ""
        await asyncio.sleep(0)
    if text:
        yield text.encode()
