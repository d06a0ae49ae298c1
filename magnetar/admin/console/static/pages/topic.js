// One topic: figures, live rate chart, producers, subscriptions (skip, reset), consumers,
// messages, and the topic's actions; a partitioned topic: totals and a row per partition.
import { get } from "../api.js";
import { act, enc } from "../actions.js";
import { messageBrowser } from "../browser.js";
import { rateChart } from "../chart.js";
import { topicActions } from "../topic-actions.js";
import { card, fmtBytes, fmtNum, fmtRate, fmtTime, h, section, shortTopic, table, topicHref } from "../ui.js";

function actionBar(actions, partitioned) {
  const b = (id, label, fn, cls = "secondary") => h("button", { class: cls, id, onclick: fn }, label);
  return h("div", { class: "toolbar topic-actions", id: "topic-actions" },
    b("produce", "Produce message…", actions.produce, "primary"), b("create-subscription", "Create subscription…", actions.subscribe),
    partitioned ? "" : b("unload", "Unload", actions.unload), partitioned ? "" : b("terminate", "Terminate…", actions.terminate, "danger-outline"),
    b("delete-topic", "Delete…", actions.remove, "danger-outline"));
}

function partitionedView(d, boxes) {
  const t = d.totals;
  boxes.cards.replaceChildren(card("Rate in", fmtRate(t.msgRateIn), fmtBytes(t.msgThroughputIn) + "/s"),
    card("Rate out", fmtRate(t.msgRateOut), fmtBytes(t.msgThroughputOut) + "/s"),
    card("Backlog", fmtNum(t.backlog), "messages, all partitions"), card("Storage", fmtBytes(t.storageSize)),
    card("Partitions", fmtNum(d.partitions.length), `${fmtNum(t.loadedPartitions)} loaded`),
    card("Producers", fmtNum(t.producers), "over the partitions"), card("Subscriptions", fmtNum(Object.keys(d.subscriptions).length)));
  const unreachable = Object.entries(d.unreachable || {});
  boxes.partitions.replaceChildren(
    unreachable.length ? h("p", { class: "notice" }, "No figures from: " + unreachable.map(([b, r]) => `${b} (${r})`).join("; ")) : "",
    table([
      { key: "name", label: "Partition", render: (p) => h("a", { href: topicHref(p.name) }, shortTopic(p.name)) },
      { key: "msgRateIn", label: "Rate in", num: true, render: (p) => fmtRate(p.msgRateIn) },
      { key: "msgRateOut", label: "Rate out", num: true, render: (p) => fmtRate(p.msgRateOut) },
      { key: "backlog", label: "Backlog", num: true, render: (p) => fmtNum(p.backlog) },
      { key: "storageSize", label: "Storage", num: true, render: (p) => fmtBytes(p.storageSize) },
      { key: "producers", label: "Producers", num: true, render: (p) => fmtNum(p.producers) },
      { key: "subscriptions", label: "Subscriptions", num: true, render: (p) => fmtNum(p.subscriptions) },
      { key: "owner", label: "Broker", render: (p) => p.owner || h("span", { class: "muted" }, "not loaded") },
    ], [...d.partitions, { name: "total", total: true }].map((p) => p.total ? { ...t, name: d.name, total: true } : p), {
      rowId: (p) => p.total ? "total" : p.name, class: "partitions" }));
  const totalRow = boxes.partitions.querySelector("tr[data-row='total']");
  if (totalRow) { totalRow.classList.add("total"); totalRow.cells[0].replaceChildren(h("strong", {}, "Total")); totalRow.cells[7].textContent = t.owner || "–"; }
  boxes.subs.replaceChildren(table([
    { key: "name", label: "Subscription" },
    { key: "type", label: "Type", render: (x) => h("span", { class: "badge" }, x.type) },
    { key: "backlog", label: "Backlog", num: true, render: (x) => fmtNum(x.backlog) },
    { key: "consumers", label: "Consumers", num: true, render: (x) => fmtNum(x.consumers) },
    { key: "unacked", label: "Unacked", num: true, render: (x) => fmtNum(x.unacked) },
    { key: "delivered", label: "Delivered", num: true, render: (x) => fmtNum(x.delivered) },
    { key: "partitions", label: "On partitions", num: true, render: (x) => fmtNum(x.partitions) },
  ], Object.entries(d.subscriptions).map(([n, x]) => ({ name: n, ...x })), { rowId: (x) => x.name, class: "subscriptions",
    empty: "No subscription on a loaded partition." }));
}

export function render({ rest, navigate }) {
  const name = rest.length >= 4 ? `${rest[0]}://${rest[1]}/${rest[2]}/${rest[3]}` : "";
  const topicPath = rest.slice(1, 4).map(enc).join("/");
  const el = h("div", { class: "page", id: "page-topic", "data-topic": name });
  const head = h("div", { class: "topic-head" });
  const cards = h("div", { class: "cards" });
  const chartBox = h("div", { class: "chart", id: "rate-chart" });
  const producers = h("div", { id: "producers" });
  const subs = h("div", { id: "subscriptions" });
  const partitions = h("div", { id: "partitions" });
  const consumers = h("div", { id: "consumers" });
  const chart = rateChart(chartBox);
  let built = false;
  el.append(h("p", { class: "crumbs" }, h("a", { href: "#/topics" }, "Topics"), " / ", shortTopic(name)), head);

  function build(detail) {
    const actions = topicActions(shortTopic(name), topicPath, detail.partitioned, refresh, navigate);
    if (detail.partitioned) {
      chart.seed(detail.history);
      el.append(actionBar(actions, true), cards, section("Rates, all partitions (live)", chartBox), section("Partitions", partitions),
        section("Subscriptions (all partitions)", subs));
    } else {
      chart.seed(detail.history);
      el.append(actionBar(actions, false), cards, section("Rates (live)", chartBox), section("Producers", producers),
        section("Subscriptions", subs), section("Consumers", consumers), section("Messages", messageBrowser(topicPath)));
    }
    built = true;
  }

  function subAction(sub, kind) {
    const base = `/console/api/owner/${topicPath}/subscription/${enc(sub)}`;
    if (kind === "skip") {
      return act({ title: `Skip messages on ${sub}`, text: "The subscription's cursor moves past the next N messages; they are not delivered to it.",
        fields: [{ name: "n", label: "How many", value: "1", type: "number" }], confirm: "Skip", danger: true,
        validate: (v) => /^[1-9]\d*$/.test(v.n) ? null : `How many must be a whole number of 1 or more, not “${v.n}”.` },
      (v) => ({ method: "POST", path: `${base}/skip/${enc(v.n)}`, success: `Skipped ${v.n} on ${sub}` }), refresh);
    }
    if (kind === "skip_all") {
      return act({ title: `Clear the backlog of ${sub}`, text: "Every message not yet acknowledged is skipped.", confirm: "Skip all", danger: true },
        () => ({ method: "POST", path: `${base}/skip_all`, success: `Backlog of ${sub} cleared` }), refresh);
    }
    return act({ title: `Reset the cursor of ${sub}`, text: "Consumers are sent the messages again from that point.",
      fields: [{ name: "to", label: "To", options: [{ value: "earliest", label: "the earliest message" }, { value: "latest", label: "the end (skip everything)" },
        { value: "id", label: "a message id (below)" }, { value: "time", label: "a publish time (below, ms since epoch)" }] },
      { name: "value", label: "Message id (L:E) or time (ms)", placeholder: "12:0" }], confirm: "Reset cursor", danger: true,
      validate: (v) => v.to === "id" && !/^\d+:\d+$/.test(v.value) ? `A message id is ledger:entry (e.g. 12:0), not “${v.value}”.`
        : v.to === "time" && !/^\d+$/.test(v.value) ? `A publish time is ms since the epoch (e.g. ${Date.now()}), not “${v.value}”.` : null },
    (v) => {
      if (v.to === "time") return { method: "POST", path: `${base}/resetcursor/${enc(v.value)}`, success: `Cursor of ${sub} reset` };
      let body = v.to;
      if (v.to === "id") { const [l, e] = v.value.split(":").map(Number); body = { ledgerId: l, entryId: e }; }
      return { method: "POST", path: `${base}/resetcursor`, body, success: `Cursor of ${sub} reset` };
    }, refresh);
  }

  function draw(d) {
    head.replaceChildren(h("h1", {}, shortTopic(name)), h("div", { class: "meta" },
      d.partitioned ? h("span", { class: "badge" }, `partitioned · ${d.partitions.length} partitions`) : [
        h("span", {}, "owner ", h("strong", { id: "topic-owner" }, d.owner)), h("span", {}, "bundle ", h("code", {}, d.bundle)),
        h("span", {}, "topic epoch ", h("strong", {}, fmtNum(d.stats.topicEpoch))),
        h("span", {}, "schema ", h("strong", {}, d.schema ? `${d.schema.type} v${d.schema.version}` : "none")),
        d.internalStats.state === "Terminated" ? h("span", { class: "badge warn" }, "terminated") : ""]));
    if (d.partitioned) {
      partitionedView(d, { cards, partitions, subs });
      chart.push(Date.now() / 1000, d.totals.msgRateIn, d.totals.msgRateOut);
      return;
    }
    const s = d.stats;
    const backlog = Object.values(s.subscriptions).reduce((a, x) => a + (x.msgBacklog || 0), 0);
    cards.replaceChildren(card("Rate in", fmtRate(s.msgRateIn), fmtBytes(s.msgThroughputIn) + "/s"),
      card("Rate out", fmtRate(s.msgRateOut), fmtBytes(s.msgThroughputOut) + "/s"),
      card("Backlog", fmtNum(backlog), "messages"), card("Storage", fmtBytes(s.storageSize), fmtNum(d.internalStats.numberOfEntries) + " entries"),
      card("Messages in", fmtNum(s.msgInCounter), "next offset " + fmtNum(d.internalStats.nextOffset)),
      card("Producers", fmtNum(s.publishers.length)), card("Subscriptions", fmtNum(Object.keys(s.subscriptions).length)));
    chart.push(Date.now() / 1000, s.msgRateIn, s.msgRateOut);
    producers.replaceChildren(table([
      { key: "producerName", label: "Producer" },
      { key: "producerId", label: "Id", num: true },
      { key: "accessMode", label: "Access mode", render: (p) => h("span", { class: "badge" }, p.accessMode) },
      { key: "epoch", label: "Topic epoch", num: true, render: () => fmtNum(s.topicEpoch) },
      { key: "fenced", label: "Fenced", render: (p) => p.fenced ? h("span", { class: "badge bad" }, "fenced") : h("span", { class: "badge ok" }, "no") },
      { key: "msgInCounter", label: "Messages", num: true, render: (p) => fmtNum(p.msgInCounter) },
      { key: "address", label: "Address" },
      { key: "connectedSince", label: "Since" },
    ], s.publishers, { rowId: (p) => p.producerName, class: "producers", empty: "No producer connected." }));
    subs.replaceChildren(table([
      { key: "name", label: "Subscription", render: (x) => h("span", {}, x.name, x.isReplicated ? h("span", { class: "badge" }, "replicated") : "") },
      { key: "type", label: "Type", render: (x) => h("span", { class: "badge" }, x.type) },
      { key: "msgBacklog", label: "Backlog", num: true, render: (x) => fmtNum(x.msgBacklog) },
      { key: "consumers", label: "Consumers", num: true, render: (x) => fmtNum(x.consumers.length) },
      { key: "unacked", label: "Unacked", num: true, render: (x) => fmtNum(x.consumers.reduce((a, c) => a + (c.unackedMessages || 0), 0)) },
      { key: "msgOutCounter", label: "Delivered", num: true, render: (x) => fmtNum(x.msgOutCounter) },
      { key: "msgRateOut", label: "Rate out", num: true, render: (x) => x.msgRateOut === undefined ? "–" : fmtRate(x.msgRateOut) },
      { key: "actions", label: "", render: (x) => h("span", { class: "row-actions" },
        h("button", { class: "small", "data-action": "skip", onclick: () => subAction(x.name, "skip") }, "Skip"),
        h("button", { class: "small", "data-action": "skip-all", onclick: () => subAction(x.name, "skip_all") }, "Skip all"),
        h("button", { class: "small", "data-action": "reset", onclick: () => subAction(x.name, "reset") }, "Reset cursor")) },
    ], Object.entries(s.subscriptions).map(([n, x]) => ({ name: n, ...x })), { rowId: (x) => x.name, class: "subscriptions", empty: "No subscription." }));
    const all = Object.entries(s.subscriptions).flatMap(([n, x]) => x.consumers.map((c) => ({ subscription: n, type: x.type, ...c })));
    consumers.replaceChildren(table([
      { key: "consumerName", label: "Consumer", render: (c) => c.consumerName || h("span", { class: "muted" }, "–") },
      { key: "subscription", label: "Subscription" },
      { key: "address", label: "Address", render: (c) => c.address ? h("code", {}, c.address) : "–" },
      { key: "availablePermits", label: "Permits", num: true, render: (c) => fmtNum(c.availablePermits) },
      { key: "unackedMessages", label: "Unacked", num: true, render: (c) => fmtNum(c.unackedMessages) },
      { key: "msgRateOut", label: "Rate out", num: true, render: (c) => c.msgRateOut === undefined ? "–" : fmtRate(c.msgRateOut) },
      { key: "messageAckRate", label: "Acks", num: true, render: (c) => c.messageAckRate === undefined ? "–" : fmtRate(c.messageAckRate) },
      { key: "msgOutCounter", label: "Delivered", num: true, render: (c) => fmtNum(c.msgOutCounter) },
      { key: "lastAckedTimestamp", label: "Last ack", render: (c) => c.lastAckedTimestamp ? fmtTime(c.lastAckedTimestamp) : h("span", { class: "muted" }, "never") },
      { key: "blocked", label: "Blocked", render: (c) => c.blockedConsumerOnUnackedMsgs ? h("span", { class: "badge bad" }, "blocked") : "no" },
      { key: "connectedSince", label: "Since" },
    ], all, { rowId: (c) => `${c.subscription}/${c.consumerName}`, class: "consumers", empty: "No consumer connected." }));
  }

  async function refresh() {
    // The broker's rate history once, on the first load (it seeds the chart).
    const detail = await get(`/console/api/topic/${topicPath}` + (built ? "?history=0" : ""));
    if (!built) build(detail);
    draw(detail);
  }
  return { el, refresh, stop: chart.stop, title: shortTopic(name) };
}
