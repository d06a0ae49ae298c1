"""The web console in a real Chromium against a real standalone broker: the
pages show what the admin API says, follow traffic, carry out each action
(or show the broker's reason for refusing it), and page 10,000 topics on
the server. Screenshots land in console-screenshots/ (docs/console.md)."""
from __future__ import annotations

import threading
import time

import pulsar
from pulsar.schema import JsonSchema, Record, Integer, String

from tests.helpers import shared_broker, shared_client
from tests.integration.admin_support import call, ok


class Order(Record):
    order = Integer()
    item = String()


broker = shared_broker()
client = shared_client()


def stats(broker, topic: str) -> dict:
    return ok(broker, "GET", f"persistent/public/default/{topic}/stats")


def fmt_bytes(v: float) -> str:
    """The console's byte format (ui.js fmtBytes)."""
    units = ["B", "KiB", "MiB", "GiB", "TiB"]
    i = 0
    while v >= 1024 and i < len(units) - 1:
        v /= 1024
        i += 1
    return f"{v:.0f} {units[i]}" if i == 0 else f"{v:.1f} {units[i]}"


def row(b, selector: str, key: str) -> str:
    return b.row(selector, key)


def test_overview_shows_the_broker_as_leader_and_its_bundle(broker, browser_on):
    b = browser_on(broker.admin_url)
    b.open("#/overview")
    me = f"127.0.0.1:{broker.admin_port}"
    b.wait_text("table.brokers", me)
    assert "leader" in row(b, "table.brokers", me)
    assert "Owned" in row(b, "table.bundles", "public/default/0x00000000_0xffffffff")
    assert me in b.text(".cards")
    b.wait(lambda d: "% of a core" in b.text("table.brokers"), what="the CPU meter")
    b.shot("overview-standalone")


def test_topics_show_the_admin_api_figures_and_follow_traffic(broker, client, browser_on):
    producer = client.create_producer("persistent://public/default/shipments", producer_name="shipper")
    consumer = client.subscribe("persistent://public/default/shipments", "audit",
                                initial_position=pulsar.InitialPosition.Earliest)
    for i in range(25):
        producer.send(f"parcel-{i}".encode())
    ok(broker, "PUT", "persistent/public/default/idle-topic")
    b = browser_on(broker.admin_url)
    b.open("#/topics")
    name = "persistent://public/default/shipments"
    b.wait(lambda d: "25" in row(b, "table.topics", name), what="the backlog of 25")
    s = stats(broker, "shipments")
    text = row(b, "table.topics", name)
    assert fmt_bytes(s["storageSize"]) in text, (text, s["storageSize"])
    cells = b.cells("table.topics", name)
    assert cells[3] == str(s["subscriptions"]["audit"]["msgBacklog"]) == "25"
    assert cells[5] == "1" and cells[6] == "1"  # producers, subscriptions
    assert "persistent://public/default/idle-topic" in b.rows("table.topics")
    # Traffic: the row follows without a reload.
    for i in range(15):
        producer.send(f"parcel-more-{i}".encode())
    b.wait(lambda d: b.cells("table.topics", name)[3:4] == ["40"],
           what="the backlog to reach 40")
    # Search and sort run on the broker.
    b.fill("#topic-search", "ship")
    b.wait(lambda d: b.rows("table.topics") == [name],
           what="only the matching topic")
    b.fill("#topic-search", "")
    b.click("th[data-key='backlog']")
    b.wait(lambda d: b.rows("table.topics")[:1] == [name],
           what="the busiest topic first")
    b.shot("topics")
    producer.close()
    consumer.close()


def test_the_topic_page_shows_producers_subscriptions_and_decoded_messages(broker, client, browser_on):
    topic = "persistent://public/default/orders"
    producer = client.create_producer(topic, producer_name="order-writer", schema=JsonSchema(Order),
                                      access_mode=pulsar.ProducerAccessMode.Exclusive)
    consumer = client.subscribe(topic, "billing", schema=JsonSchema(Order), consumer_type=pulsar.ConsumerType.Shared,
                                initial_position=pulsar.InitialPosition.Earliest)
    for i in range(12):
        producer.send(Order(order=i, item=f"book-{i}"), partition_key=f"customer-{i % 3}",
                      properties={"channel": "web"})
    received = [consumer.receive(timeout_millis=10000) for _ in range(3)]  # 3 delivered, unacked
    b = browser_on(broker.admin_url)
    b.open("#/topic/persistent/public/default/orders")
    b.wait_text("table.producers", "order-writer")
    producer_row = row(b, "table.producers", "order-writer")
    assert "Exclusive" in producer_row and "no" in producer_row  # access mode, not fenced
    b.wait(lambda d: "Shared" in row(b, "table.subscriptions", "billing"), what="the billing subscription")
    s = stats(broker, "orders")["subscriptions"]["billing"]
    cells = b.cells("table.subscriptions", "billing")
    assert cells[2] == str(s["msgBacklog"]) == "12"
    assert cells[3] == "1"
    unacked = sum(c["unackedMessages"] for c in s["consumers"])
    assert unacked >= 3  # dispatched to the client (its receive queue included), not acknowledged
    b.wait(lambda d: b.cells("table.subscriptions", "billing")[4:5] == [str(unacked)],
           what=f"{unacked} unacked messages")
    assert "schema Json v0" in b.text(".topic-head").replace("\n", " ")
    # Message browser: from offset 5, decoded by the JSON schema, with key and properties.
    b.fill("#browse-at", "5")
    b.fill("#browse-count", "4")
    b.click("#browse-read")
    b.wait(lambda d: len(b.rows("table.messages")) == 4, what="4 messages")
    message_id = b.rows("table.messages")[0]
    first = b.row("table.messages", message_id)
    assert '"item": "book-5"' in first and "customer-2" in first and "channel=web" in first
    # By message id: the same message first.
    b.select("#browse-mode", "messageId")
    b.fill("#browse-at", message_id)
    b.click("#browse-read")
    b.wait(lambda d: b.rows("table.messages")[:1] == [message_id] and len(b.rows("table.messages")) == 4,
           what="the browser at that message id")
    b.wait(lambda d: b.css("#rate-chart canvas"), what="the rate chart")
    # Live traffic: the rate card and chart follow it.
    sending = threading.Event()

    def send() -> None:
        i = 100
        while not sending.is_set():
            producer.send_async(Order(order=i, item="live"), None)
            i += 1
            time.sleep(0.004)

    sender = threading.Thread(target=send)
    sender.start()
    try:
        b.wait(lambda d: float(b.text(".cards .card").split()[2]) > 20, timeout=30, what="a rate in above 20/s")
        points = b.driver.execute_script("return Number(document.getElementById('rate-chart').dataset.points)")
        b.wait(lambda d: d.execute_script("return Number(document.getElementById('rate-chart').dataset.points)")
               >= points + 8,
               what="eight more points on the chart")
        b.shot("topic")
    finally:
        sending.set()
        sender.join()
        producer.flush()
    for m in received:
        consumer.acknowledge(m)
    producer.close()
    consumer.close()


def test_each_action_is_confirmed_and_done_or_refused_with_the_reason(broker, client, browser_on):
    b = browser_on(broker.admin_url)
    b.open("#/tenants")
    b.wait_text("#tenant-list", "public/default")
    b.click("#create-tenant")
    b.confirm(tenant="acme", adminRoles="acme-admin", allowedClusters="standalone")
    assert "created" in b.toast()
    assert ok(broker, "GET", "tenants/acme")["adminRoles"] == ["acme-admin"]
    b.click("#create-namespace")
    b.confirm(namespace="acme/orders")
    b.wait(lambda d: call(broker, "GET", "namespaces/acme")[1] == ["acme/orders"], what="the namespace")
    b.wait_text("#tenant-list", "acme/orders")
    b.click("table.namespaces tr[data-row='acme/orders'] button[data-action='grant']")
    b.confirm(role="app-1")
    b.wait(lambda d: ok(broker, "GET", "namespaces/acme/orders/permissions").get("app-1") == ["consume", "produce"]
           or ok(broker, "GET", "namespaces/acme/orders/permissions").get("app-1") == ["produce", "consume"],
           what="the grant")
    b.wait_text("table.namespaces", "app-1")
    b.shot("tenants")
    # A topic, from the topics page.
    b.go("#/topics")
    b.click("#create-topic")
    b.confirm(namespace="acme/orders", name="invoices", partitions="0")
    b.wait(lambda d: "persistent://acme/orders/invoices" in (call(broker, "GET", "persistent/acme/orders")[1] or []),
           what="the topic to exist")
    # Refused: a topic that exists already; the broker's reason is shown.
    b.click("#create-topic")
    b.confirm(namespace="acme/orders", name="invoices", partitions="0")
    assert "Refused by the broker" in b.toast() and "exist" in b.text("#toast").lower()
    # A partitioned topic: its page lists the partitions and their total.
    b.click("#create-topic")
    b.confirm(namespace="acme/orders", name="receipts", partitions="3")
    assert "Created" in b.toast()
    assert ok(broker, "GET", "persistent/acme/orders/receipts/partitions") == {"partitions": 3}
    b.go("#/topic/persistent/acme/orders/receipts")
    b.wait(lambda d: len(b.rows("table.partitions")) == 4, what="3 partitions and the total listed")
    assert "acme/orders/receipts-partition-2" in b.text("table.partitions")
    # Skip and reset a cursor.
    topic = "persistent://acme/orders/invoices"
    consumer = client.subscribe(topic, "ledger", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(topic)
    for i in range(10):
        producer.send(f"invoice-{i}".encode())
    b.go("#/topic/persistent/acme/orders/invoices")
    b.wait(lambda d: b.cells("table.subscriptions", "ledger")[2:3] == ["10"],
           what="a backlog of 10")
    b.click("table.subscriptions tr[data-row='ledger'] button[data-action='skip']")
    b.confirm(n="4")
    assert "Skipped 4" in b.toast()
    assert ok(broker, "GET", "persistent/acme/orders/invoices/stats")["subscriptions"]["ledger"]["msgBacklog"] == 6
    b.click("table.subscriptions tr[data-row='ledger'] button[data-action='reset']")
    b.confirm(to="earliest")
    b.wait(lambda d: ok(broker, "GET", "persistent/acme/orders/invoices/stats")["subscriptions"]["ledger"]["msgBacklog"]
           == 10, what="the reset cursor")
    # Moving a standalone broker's bundle: refused, with the broker's reason.
    b.go("#/overview")
    b.wait(lambda d: b.css("table.bundles button[data-action='move']"), what="the move button")
    b.click("table.bundles tr[data-row='acme/orders/0x00000000_0xffffffff'] button[data-action='move']")
    b.confirm()
    toast = b.toast()
    assert "Refused by the broker" in toast and "standalone" in toast, toast
    b.shot("refused-action", full=False)
    producer.close()
    consumer.close()
