"""The console as an operator works in it, in a real Chromium against one
real standalone broker (one broker and one browser for the module): a
partitioned topic as one row with totals and its page with a row per
partition; namespace policies as fields, edited with a confirmation; a
topic's actions (produce, create subscription, unload, terminate, delete);
the message filters; consumers and the consumer-lag view; the live chart's
times, legend and the history it opens with. Bad input in each form gets a
clear sentence. Screenshots land in console-screenshots/."""
from __future__ import annotations

import json
import re
import threading
import time
import urllib.error
import urllib.request

import pulsar
import pytest

from tests.helpers import quiet_logger, shared_broker
from tests.integration.admin_support import call, ok

from .browser import Browser, missing

broker = shared_broker()
CLOCK = re.compile(r"^\d\d:\d\d:\d\d$")


@pytest.fixture(scope="module")
def client(broker):
    c = pulsar.Client(broker.service_url, operation_timeout_seconds=10, logger=quiet_logger())
    yield c
    c.close()


@pytest.fixture(scope="module")
def b(broker):
    reason = missing()
    if reason:
        raise AssertionError(reason)
    browser = Browser(broker.admin_url)
    yield browser
    browser.close()


def console_get(broker, path: str) -> tuple[int, dict]:
    """``(status, decoded JSON)`` of ``GET /console/api/<path>``."""
    try:
        with urllib.request.urlopen(f"{broker.admin_url}/console/api/{path}", timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def shot(b, name: str, full: bool = True) -> None:
    """A screenshot without an earlier test's toast (one page for the module)."""
    b.driver.execute_script("document.getElementById('toast').hidden = true")
    b.shot(name, full)


def stats(broker, topic: str) -> dict:
    return ok(broker, "GET", f"persistent/public/default/{topic}/stats")


def test_a_partitioned_topic_is_one_row_with_totals_and_its_page_has_a_row_per_partition(broker, client, b):
    ok(broker, "PUT", "persistent/public/default/payments/partitions", 3)
    producer = client.create_producer("persistent://public/default/payments", batching_enabled=False)
    consumer = client.subscribe("persistent://public/default/payments", "settle",
                                initial_position=pulsar.InitialPosition.Earliest, receiver_queue_size=1)
    for i in range(30):
        producer.send(f"payment-{i}".encode(), partition_key=f"account-{i}")
    parts = [stats(broker, f"payments-partition-{i}")["subscriptions"]["settle"]["msgBacklog"] for i in range(3)]
    assert sum(parts) == 30 and all(parts), parts  # spread over the three
    name = "persistent://public/default/payments"
    b.open("#/topics")
    b.wait(lambda d: b.cells("table.topics", name)[3:4] == ["30"], what="the parent's backlog total of 30")
    rows = b.rows("table.topics")
    assert not [r for r in rows if "payments-partition-" in r], rows  # the partitions are not rows here
    cells = b.cells("table.topics", name)
    assert "3 partitions" in cells[0]
    assert cells[5] == "3" and cells[6] == "1", cells  # a producer per partition; one subscription, not three
    shot(b, "topics-partitioned")
    b.fill("#topic-search", "payments-partition-1")  # a partition's name finds its partitioned topic's row
    b.wait(lambda d: b.rows("table.topics") == [name], what="the parent row found by a partition's name")
    b.fill("#topic-search", "")
    # Partitions as rows, as Pulsar lists them, on request.
    b.click("#show-partitions")
    b.wait(lambda d: f"{name}-partition-2" in b.rows("table.topics"), what="the partitions as rows")
    assert name not in b.rows("table.topics")
    b.click("#show-partitions")
    # Its page: totals, one row per partition with its own figures, the subscription's totals.
    b.go("#/topic/persistent/public/default/payments")
    b.wait(lambda d: b.cells("table.partitions", "total")[3:4] == ["30"], what="the total backlog row")
    for i in range(3):
        b.wait(lambda d: b.cells("table.partitions", f"{name}-partition-{i}")[3:4] == [str(parts[i])],
               what=f"partition {i}'s backlog of {parts[i]}")
    assert "Total" in b.cells("table.partitions", "total")[0]
    sub = b.cells("table.subscriptions", "settle")
    assert sub[2] == "30" and sub[3] == "3" and sub[6] == "3", sub  # backlog, a consumer on each of 3 partitions
    assert "30" in b.text(".cards")
    b.wait(lambda d: d.execute_script("return Number(document.getElementById('rate-chart').dataset.length)") >= 2,
           what="the chart of the partitions' total rates")
    shot(b, "topic-partitioned")
    producer.close()
    consumer.close()


def test_namespace_policies_show_as_fields_and_are_edited_with_a_confirmation(broker, b):
    b.driver.set_window_size(1400, 1000)
    try:
        b.open("#/tenants")
        b.wait_text("#tenant-list", "public/default")
        grant = "table.namespaces tr[data-row='public/default'] button[data-action='grant']"
        b.wait(lambda d: b.css(grant), what="the Grant button")
        right, width = b.driver.execute_script(
            "return [document.querySelector(arguments[0]).getBoundingClientRect().right, window.innerWidth]", grant)
        assert right <= width, f"the Grant button ends at {right} px in a {width} px window"
        b.click("table.namespaces tr[data-row='public/default'] button[data-action='policies']")
        # Bad input: the dialog says what is wrong and stays open; nothing is sent.
        b.fill("#field-ttl", "an hour")
        b.click("#dialog-confirm")
        b.wait_text("#dialog-error", "not a whole number")
        b.fill("#field-ttl", "3600")
        b.fill("#field-retentionMinutes", "120")
        b.click("#dialog-confirm")
        b.wait_text("#dialog-error", "both a time and a size")
        b.fill("#field-retentionMB", "512")
        b.select("#field-dedup", "true")
        b.fill("#field-quotaMiB", "10")
        b.select("#field-quotaPolicy", "producer_exception")
        b.fill("#field-publishMsg", "1000")
        b.fill("#field-dispatchMsg", "500")
        b.click("#dialog-confirm")
        # The confirmation lists the changes before anything is applied.
        b.wait_text("#policy-changes", "TTL: broker default → 3,600 s")
        listed = b.text("#policy-changes")
        for what in ("retention: broker default → 120 min, 512 MB", "deduplication: broker default → on",
                     "backlog quota: broker default → 10 MiB · producer_exception",
                     "publish rate: broker default → 1,000 msg/s",
                     "dispatch rate: broker default → 500 msg per 1 s"):
            assert what in listed, listed
        assert ok(broker, "GET", "namespaces/public/default/messageTTL") is None
        b.shot("policy-changes", full=False)
        b.confirm()
        assert "saved" in b.toast()
        assert ok(broker, "GET", "namespaces/public/default/messageTTL") == 3600
        assert ok(broker, "GET", "namespaces/public/default/retention") == {"retentionTimeInMinutes": 120,
                                                                             "retentionSizeInMB": 512}
        assert ok(broker, "GET", "namespaces/public/default/deduplication") is True
        quota = ok(broker, "GET", "namespaces/public/default/backlogQuotaMap")["destination_storage"]
        assert quota["limitSize"] == 10 * 1024 * 1024 and quota["policy"] == "producer_exception"
        assert ok(broker, "GET", "namespaces/public/default/publishRate")["publishThrottlingRateInMsg"] == 1000
        assert ok(broker, "GET", "namespaces/public/default/dispatchRate")["dispatchThrottlingRateInMsg"] == 500
        b.wait(lambda d: "3,600 s" in b.row("table.namespaces", "public/default"), what="the TTL as a field")
        shown = b.row("table.namespaces", "public/default")
        assert "120 min, 512 MB" in shown and "10 MiB" in shown and "1,000 msg/s" in shown, shown
        b.shot("tenants-policies")
        # Back to the broker defaults (the other tests produce here): every field emptied.
        b.click("table.namespaces tr[data-row='public/default'] button[data-action='policies']")
        for field in ("ttl", "retentionMinutes", "retentionMB", "quotaMiB", "publishMsg", "publishBytes", "dispatchMsg",
                      "dispatchBytes"):
            b.fill(f"#field-{field}", "")
        b.select("#field-dedup", "")
        b.click("#dialog-confirm")
        b.wait_text("#policy-changes", "TTL: 3,600 s → broker default")
        b.confirm()
        assert "saved" in b.toast()
        assert ok(broker, "GET", "namespaces/public/default/messageTTL") is None
        assert ok(broker, "GET", "namespaces/public/default/publishRate") is None
    finally:
        b.driver.set_window_size(1440, 1000)


def test_topic_actions_produce_subscribe_unload_terminate_delete(broker, client, b):
    ok(broker, "PUT", "persistent/public/default/ledger-lines")
    topic = "persistent://public/default/ledger-lines"
    b.open("#/topic/persistent/public/default/ledger-lines")
    b.wait(lambda d: b.css("#produce"), what="the action bar")
    # Produce: key, properties, value; bad properties are named in the dialog.
    b.click("#produce")
    b.fill("#field-key", "customer-7")
    b.fill("#field-properties", "channel=web, oops")
    b.fill("#field-value", "first line")
    b.click("#dialog-confirm")
    b.wait_text("#dialog-error", "“oops” is not name=value")
    b.confirm(properties="channel=web, origin=console")  # the same dialog, still open
    assert "Produced to public/default/ledger-lines as" in b.toast()
    assert stats(broker, "ledger-lines")["msgInCounter"] == 1
    b.fill("#browse-at", "0")
    b.click("#browse-read")
    b.wait(lambda d: len(b.rows("table.messages")) == 1, what="the produced message")
    first = b.row("table.messages", b.rows("table.messages")[0])
    assert "customer-7" in first and "channel=web" in first and "origin=console" in first and "first line" in first
    # The official client reads it as sent.
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    m = reader.read_next(timeout_millis=10000)
    assert (m.data(), m.partition_key(), m.properties()) == (b"first line", "customer-7",
                                                               {"channel": "web", "origin": "console"})
    reader.close()
    # Create a subscription: a bad name is refused in the dialog, a good one made at the earliest message.
    b.click("#create-subscription")
    b.fill("#field-subscription", "bad name!")
    b.click("#dialog-confirm")
    b.wait_text("#dialog-error", "is not a subscription name")
    b.confirm(subscription="audit", start="earliest")
    assert "Subscription audit created" in b.toast()
    b.wait(lambda d: b.cells("table.subscriptions", "audit")[2:3] == ["1"], what="audit with a backlog of 1")
    # Subscription actions name bad input too.
    b.click("table.subscriptions tr[data-row='audit'] button[data-action='skip']")
    b.fill("#field-n", "-2")
    b.click("#dialog-confirm")
    b.wait_text("#dialog-error", "whole number of 1 or more")
    b.click("#dialog-cancel")
    b.click("table.subscriptions tr[data-row='audit'] button[data-action='reset']")
    b.select("#field-to", "id")
    b.fill("#field-value", "twelve")
    b.click("#dialog-confirm")
    b.wait_text("#dialog-error", "ledger:entry")
    b.click("#dialog-cancel")
    shot(b, "topic-actions")
    # Unload: the topic is loaded again on demand, nothing lost.
    b.click("#unload")
    b.confirm()
    assert "unloaded" in b.toast()
    b.wait(lambda d: b.cells("table.subscriptions", "audit")[2:3] == ["1"], what="the reloaded topic")
    # Terminate: the typed name must match; then producing is refused with the broker's reason.
    b.click("#terminate")
    b.fill("#field-confirmName", "ledger")
    b.click("#dialog-confirm")
    b.wait_text("#dialog-error", "not the topic's name")
    b.confirm(confirmName="ledger-lines")
    assert "terminated at" in b.toast()
    b.wait_text(".topic-head", "terminated")
    b.click("#produce")
    b.confirm(value="too late")
    toast = b.toast()
    assert "Refused by the broker" in toast and "terminated" in toast.lower(), toast
    # Delete: refused while a client is attached unless forced; then gone.
    consumer = client.subscribe(topic, "audit")
    b.click("#delete-topic")
    b.confirm(confirmName="ledger-lines")
    toast = b.toast()
    assert "Refused by the broker" in toast, toast
    b.click("#delete-topic")
    b.confirm(force="true", confirmName="ledger-lines")
    assert "deleted" in b.toast()
    b.wait(lambda d: d.current_url.endswith("#/topics"), what="the topics list after the delete")
    consumer.close()
    # The consumer, disconnected by the delete, may have made the name again
    # (automatic topic creation) before it closed: then it is a new, empty topic.
    if topic in (call(broker, "GET", "persistent/public/default")[1] or []):
        internal = ok(broker, "GET", "persistent/public/default/ledger-lines/internalStats")
        assert internal["numberOfEntries"] == 0 and internal.get("state") != "Terminated", internal


def test_produce_to_a_json_topic_and_a_partitioned_one(broker, client, b):
    from pulsar.schema import JsonSchema, Record, String

    class Note(Record):
        text = String()

    producer = client.create_producer("persistent://public/default/notes", schema=JsonSchema(Note))
    producer.send(Note(text="from a client"))
    b.open("#/topic/persistent/public/default/notes")
    b.click("#produce")
    b.confirm(value="not json")
    toast = b.toast()
    assert "Refused by the broker" in toast and "not JSON" in toast, toast
    b.click("#produce")
    b.confirm(value='{"text": "from the console"}')
    assert "Produced" in b.toast()
    consumer = client.subscribe("persistent://public/default/notes", "read", schema=JsonSchema(Note),
                                initial_position=pulsar.InitialPosition.Earliest)
    got = [consumer.receive(timeout_millis=10000).value().text for _ in range(2)]
    assert got == ["from a client", "from the console"]
    consumer.close()
    producer.close()
    # A partitioned topic: the key picks the partition by the Java client's default hash (JavaStringHash).
    from magnetar.client.partition_routing import java_string_hash

    b.open("#/topic/persistent/public/default/payments")
    before = [stats(broker, f"payments-partition-{i}")["msgInCounter"] for i in range(3)]
    b.click("#produce")
    b.confirm(key="account-3", value="routed")
    toast = b.toast()
    after = [stats(broker, f"payments-partition-{i}")["msgInCounter"] for i in range(3)]
    wanted = java_string_hash("account-3") % 3
    assert f"payments-partition-{wanted} " in toast, toast
    assert [a - b_ for a, b_ in zip(after, before)] == [int(i == wanted) for i in range(3)], (before, after)


def test_messages_are_filtered_by_key_property_text_and_time(broker, client, b):
    producer = client.create_producer("persistent://public/default/events", batching_enabled=True,
                                      batching_max_publish_delay_ms=5)
    for i in range(30):
        producer.send_async(f"event {i} {'error' if i % 10 == 3 else 'ok'}".encode(), None,
                            partition_key=f"device-{i % 3}", properties={"region": "eu" if i % 2 else "us"})
    producer.flush()
    # The mark stands 50 ms clear of both groups: publish times are whole
    # milliseconds, and a quick flush ended within the first batch's
    # millisecond, so a mark taken at once equalled its publish time (a
    # "from" filter is inclusive) and the batch matched.
    time.sleep(0.05)
    middle = int(time.time() * 1000)
    time.sleep(0.05)
    for i in range(30, 35):
        producer.send(f"event {i} late".encode(), partition_key="device-9", properties={"region": "ap"})
    b.open("#/topic/persistent/public/default/events")
    b.wait(lambda d: b.css("#filter-key"), what="the filters")

    def shown():
        return [b.row("table.messages", r) for r in b.rows("table.messages")]

    b.fill("#filter-key", "device-1")
    b.click("#browse-read")
    b.wait(lambda d: len(shown()) == 10 and all("device-1" in r for r in shown()), what="10 messages of device-1")
    b.fill("#filter-key", "")
    b.fill("#filter-property", "region=ap")
    b.click("#browse-read")
    b.wait(lambda d: len(shown()) == 5 and all("late" in r for r in shown()), what="the 5 messages of region ap")
    b.fill("#filter-property", "")
    b.fill("#filter-text", "ERROR")
    b.click("#browse-read")
    b.wait(lambda d: len(shown()) == 3 and all("error" in r for r in shown()), what="the 3 errors")
    b.wait_text("#browse-summary", "of 35 looked at")
    shot(b, "messages-filtered")
    b.fill("#filter-text", "")
    b.fill("#filter-from", str(middle))
    b.click("#browse-read")
    b.wait(lambda d: len(shown()) == 5 and all("late" in r for r in shown()), what="the 5 published after the mark")
    b.fill("#filter-from", "")
    b.fill("#filter-to", str(middle))
    b.click("#browse-read")
    # At least count (20): a batch is shown whole.
    b.wait(lambda d: len(shown()) >= 20 and not any("late" in r for r in shown()),
           what="the first 20 or more published before the mark, none after")
    # From the first stored message (no offset): the filters apply as well.
    b.fill("#filter-to", "")
    b.select("#browse-mode", "first")
    b.fill("#filter-text", "late")
    b.click("#browse-read")
    b.wait(lambda d: len(shown()) == 5, what="the 5 late ones from the first stored message")
    b.fill("#filter-text", "")
    b.select("#browse-mode", "offset")
    # Bad input: said in one sentence, nothing read.
    b.fill("#filter-to", "yesterday-ish")
    b.click("#browse-read")
    b.wait_text("#browse-error", "is not a time")
    b.fill("#filter-to", "")
    b.fill("#filter-from", "2026-11-28 12:00")
    b.fill("#filter-to", "2026-11-28 11:00")
    b.click("#browse-read")
    b.wait_text("#browse-error", "after the “to” time")
    status, answer = console_get(broker, "messages/public/default/events?from=soon")
    assert status == 400 and "from must be a publish time" in answer["reason"], answer
    producer.close()


def test_consumers_and_consumer_lag_across_topics(broker, client, b):
    producers = {t: client.create_producer(f"persistent://public/default/{t}", batching_enabled=False)
                 for t in ("lag-a", "lag-b")}
    slow = client.subscribe("persistent://public/default/lag-a", "slow-reader", consumer_name="reader-1",
                            receiver_queue_size=5, consumer_type=pulsar.ConsumerType.Shared)
    fast = client.subscribe("persistent://public/default/lag-b", "fast-reader", consumer_name="reader-2")
    for i in range(40):
        producers["lag-a"].send(b"a")
    for i in range(7):
        producers["lag-b"].send(b"b")
    for _ in range(7):
        fast.acknowledge(fast.receive(timeout_millis=10000))
    b.open("#/topic/persistent/public/default/lag-a")
    s = stats(broker, "lag-a")["subscriptions"]["slow-reader"]["consumers"][0]
    b.wait(lambda d: b.cells("table.consumers", "slow-reader/reader-1")[4:5] == [str(s["unackedMessages"])],
           what="the consumer's unacked count")
    cells = b.cells("table.consumers", "slow-reader/reader-1")
    assert cells[0] == "reader-1" and cells[1] == "slow-reader" and cells[2] == s["address"], cells
    assert cells[3] == str(stats(broker, "lag-a")["subscriptions"]["slow-reader"]["consumers"][0]["availablePermits"])
    shot(b, "topic-consumers")
    b.go("#/lag")
    key_a, key_b = "persistent://public/default/lag-a slow-reader", "persistent://public/default/lag-b fast-reader"
    b.wait(lambda d: b.cells("table.lag", key_a)[3:4] == ["40"], what="slow-reader's backlog of 40")
    b.wait(lambda d: b.cells("table.lag", key_b)[3:4] == ["0"], what="fast-reader's backlog of 0")
    # When each last acknowledged (the stats' lastAckedTimestamp): fast-reader did, slow-reader never.
    b.wait(lambda d: re.match(r"\d{4}-\d\d-\d\d ", b.cells("table.lag", key_b)[8]), what="fast-reader's last ack")
    assert b.cells("table.lag", key_a)[8] == "never"
    rows = b.rows("table.lag")
    assert rows.index(key_a) < rows.index(key_b)  # the largest backlog first
    shot(b, "consumer-lag")
    b.click("table.lag th[data-key='backlog']")
    b.wait(lambda d: b.rows("table.lag").index(key_b) < b.rows("table.lag").index(key_a), what="ascending backlog")
    b.fill("#lag-search", "slow")
    b.wait(lambda d: b.rows("table.lag") == [key_a], what="only slow-reader")
    b.fill("#lag-search", "")
    status, answer = console_get(broker, "subscriptions?sort=speed")
    assert status == 400 and "sort must be one of" in answer["reason"]
    slow.close()
    fast.close()
    for p in producers.values():
        p.close()


def test_the_chart_shows_clock_times_a_legend_and_the_last_minutes_on_opening(broker, client, b):
    producer = client.create_producer("persistent://public/default/ticker", batching_enabled=False)
    stop = threading.Event()

    def send() -> None:
        while not stop.is_set():
            producer.send_async(b"tick", None)
            time.sleep(0.01)

    sender = threading.Thread(target=send)
    sender.start()
    try:
        # The broker samples every 2 s while no page is open.
        def history():
            status, answer = console_get(broker, "topic/public/default/ticker")
            return status == 200 and len(answer["history"]) >= 4 and answer["history"]

        deadline = time.monotonic() + 30
        while not history():
            assert time.monotonic() < deadline, "the broker kept no history"
            time.sleep(0.2)
        b.open("#/topic/persistent/public/default/ticker", poll_ms=2000)
        b.wait(lambda d: d.execute_script("return document.getElementById('rate-chart').dataset.seeded"),
               what="the chart seeded with the broker's history")
        seeded = int(b.driver.execute_script("return document.getElementById('rate-chart').dataset.seeded"))
        assert seeded >= 4
        labels = b.wait(lambda d: d.execute_script("return document.getElementById('rate-chart').dataset.xlabels"),
                        what="the x axis labels").split()
        assert labels and all(CLOCK.match(x) for x in labels), labels
        legend = b.text(".u-legend")
        assert re.search(r"Time\s*\d\d:\d\d:\d\d", legend) and re.search(r"in\s*\d+(\.\d)? /s", legend), legend
        assert "--" not in legend, legend
        # The legend toggles a series: "out" hidden, then shown again.
        b.click(".u-legend .u-series:nth-child(3)")
        b.wait(lambda d: b.css(".u-legend .u-series.u-off"), what="the out series hidden")
        b.click(".u-legend .u-series:nth-child(3)")
        b.wait(lambda d: not b.css(".u-legend .u-series.u-off"), what="the out series shown again")
        shot(b, "topic-chart")
    finally:
        stop.set()
        sender.join()
        producer.close()
