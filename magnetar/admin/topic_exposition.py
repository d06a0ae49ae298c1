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
import time
from typing import TYPE_CHECKING, AsyncIterator, Iterator

from prometheus_client.utils import floatToGoString

from .pulsar_metrics import COUNTERS, GAUGES, SUB_COUNTERS, SUB_GAUGES, PulsarCollector
from magnetar.broker import topic_walk
from magnetar.broker.topic_walk import visit_in_slices

if TYPE_CHECKING:
    from magnetar.broker.server.server import Broker

#: Topics per chunk of text: the event loop runs other work between two chunks
#: (the topics are read in slices of bounded time: broker/topic_walk.py).
CHUNK_TOPICS = 2000
#: Rows written between two looks at the clock.
ROWS_PER_STEP = 128

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
    if type(value) is float and -1_000_000.0 < value < 1_000_000.0:
        return repr(value)  # floatToGoString's answer there (no Inf or NaN, no exponent switch), cheaper
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
        slices of topics and chunks of text; topics loaded or unloaded
        meanwhile are seen at the next scrape."""
        service = self.broker.service
        names = list(service.topics) if service else []
        topics = list(service.topics.values()) if service else []
        now = asyncio.get_running_loop().time()
        cols = _Columns()
        row_of = self.pulsar.row

        def visit(k: int) -> None:
            name, topic = names[k], topics[k]
            labels = self._labels.get(name)
            if labels is None:
                labels = self._labels_of(name, topic.name.namespace_name)
            _, _, values, sub_rows, counters = row_of(topic, now, name)
            cols.pulsar_labels.append(labels[0])
            cols.magnetar_labels.append(labels[1])
            for column, value in zip(cols.gauges, values):
                column.append(value_text(value))
            for column, value in zip(cols.counters, counters):
                column.append(value_text(value))
            for column, value in zip(cols.magnetar, (topic.msg_in, topic.bytes_in, topic.ledger.total_size,
                                                     len(topic.producers))):
                column.append(value_text(value))
            for sub, gauges, sub_counters in sub_rows:
                suffix = f',subscription="{label_text(sub)}"'
                cols.sub_labels.append(labels[0] + suffix)
                cols.sub_magnetar_labels.append(labels[1] + suffix)
                for column, value in zip(cols.sub_gauges, gauges):
                    column.append(value_text(value))
                for column, value in zip(cols.sub_counters, sub_counters):
                    column.append(value_text(value))
            cols.sub_start.append(len(cols.sub_labels))

        # Slices of bounded time, not of a number of topics (broker/topic_walk.py).
        await visit_in_slices(range(len(topics)), visit)
        await asyncio.sleep(0)
        loaded = set(names)
        self.pulsar.keep_only(loaded)
        if len(self._labels) > len(loaded):
            for gone in set(self._labels) - loaded:
                del self._labels[gone]
        del loaded
        n, n_subs = len(cols.pulsar_labels), len(cols.sub_labels)

        for i, (metric, doc) in enumerate(GAUGES):
            async for chunk in _family(f"# HELP {metric} {doc}\n# TYPE {metric} gauge\n",
                                       _lines(metric, cols.pulsar_labels, cols.gauges[i], 0, n)):
                yield chunk
        for i, (metric, doc) in enumerate(COUNTERS):
            j = SUB_COUNTERS.index(metric) if metric in SUB_COUNTERS else -1
            async for chunk in _family(f"# HELP {metric} {doc}\n# TYPE {metric} counter\n",
                                       _counter_lines(metric, cols, i, j)):
                yield chunk
        for i, (metric, doc) in enumerate(SUB_GAUGES):
            async for chunk in _family(f"# HELP {metric} {doc}\n# TYPE {metric} gauge\n",
                                       _lines(metric, cols.sub_labels, cols.sub_gauges[i], 0, n_subs)):
                yield chunk
        for j, (metric, kind, doc) in enumerate(MAGNETAR_SERIES):
            async for chunk in _family(f"# HELP {metric} {doc}\n# TYPE {metric} {kind}\n",
                                       _lines(metric, cols.magnetar_labels, cols.magnetar[j], 0, n)):
                yield chunk
        async for chunk in _family(
                "# HELP magnetar_subscription_backlog_entries Entries not yet acknowledged\n"
                "# TYPE magnetar_subscription_backlog_entries gauge\n",
                _lines("magnetar_subscription_backlog_entries", cols.sub_magnetar_labels, cols.sub_gauges[0], 0,
                       n_subs)):
            yield chunk


class _Columns:
    """One scrape's texts, a list per label or value kind, one entry per
    topic (or subscription). Lists of strings, not a tuple and lists per
    topic: strings are not tracked by the cyclic garbage collector, so the
    text kept until the scrape ends adds no work to the collections that
    run meanwhile (at 10,000 topics, 40,000 containers per scrape made a
    young collection and the next older one, ~200 ms, run during it)."""

    def __init__(self) -> None:
        self.pulsar_labels: list[str] = []
        self.magnetar_labels: list[str] = []
        self.gauges: list[list[str]] = [[] for _ in GAUGES]
        self.counters: list[list[str]] = [[] for _ in COUNTERS]
        self.magnetar: list[list[str]] = [[] for _ in MAGNETAR_SERIES]
        #: The subscriptions of topic k are entries sub_start[k] to sub_start[k + 1] of the sub_ lists.
        self.sub_start: list[int] = [0]
        self.sub_labels: list[str] = []
        self.sub_magnetar_labels: list[str] = []
        self.sub_gauges: list[list[str]] = [[] for _ in SUB_GAUGES]
        self.sub_counters: list[list[str]] = [[] for _ in SUB_COUNTERS]


def _lines(metric: str, labels: list[str], values: list[str], start: int, end: int) -> Iterator[str]:
    """The samples of entries ``start`` to ``end``, :data:`ROWS_PER_STEP` at a time."""
    for a in range(start, end, ROWS_PER_STEP):
        b = min(a + ROWS_PER_STEP, end)
        yield "".join([f"{metric}{{{label}}} {value}\n" for label, value in zip(labels[a:b], values[a:b])])


def _counter_lines(metric: str, cols: _Columns, i: int, j: int) -> Iterator[str]:
    """A counter's samples: per part of :data:`CHUNK_TOPICS` topics, the
    topics' then (an out counter, ``j`` >= 0) their subscriptions', the
    order the text always had."""
    n = len(cols.pulsar_labels)
    for start in range(0, n, CHUNK_TOPICS):
        end = min(start + CHUNK_TOPICS, n)
        yield from _lines(metric, cols.pulsar_labels, cols.counters[i], start, end)
        if j >= 0:
            yield from _lines(metric, cols.sub_labels, cols.sub_counters[j], cols.sub_start[start],
                              cols.sub_start[end])


async def _family(head: str, texts: Iterator[str]) -> AsyncIterator[bytes]:
    """One family's text: ``head`` then ``texts``; a chunk leaves, and the
    event loop runs, whenever the text has taken :data:`.topic_walk.SLICE_S`
    to write (or holds :data:`CHUNK_TOPICS` steps' rows)."""
    parts = [head]
    clock = time.perf_counter
    budget = topic_walk.SLICE_S
    started = clock()
    for text in texts:
        parts.append(text)
        now = clock()
        if now - started >= budget or len(parts) * ROWS_PER_STEP >= CHUNK_TOPICS:
            yield "".join(parts).encode()
            parts = []
            await topic_walk.rest(now - started, budget)
            started = clock()
    if parts:
        yield "".join(parts).encode()
