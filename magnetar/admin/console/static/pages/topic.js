// One topic: figures, live rate chart, producers, subscriptions (skip, reset), messages.
import { get } from "../api.js";
import { act, enc } from "../actions.js";
import { card, fmtBytes, fmtNum, fmtRate, fmtTime, h, section, shortTopic, table, topicHref } from "../ui.js";

const POINTS = 150;

function rateChart(container) {
  const data = [[], [], []];
  let plot = null;
  function size() { return { width: Math.max(320, container.clientWidth - 8), height: 220 }; }
  function push(t, rin, rout) {
    data[0].push(t); data[1].push(rin); data[2].push(rout);
    if (data[0].length > POINTS) for (const s of data) s.shift();
    container.dataset.points = String((Number(container.dataset.points) || 0) + 1);
    if (!plot && typeof uPlot !== "undefined") {
      plot = new uPlot({
        ...size(),
        series: [{}, { label: "in (msg/s)", stroke: "#4f8cff", width: 2, fill: "rgba(79,140,255,0.10)" },
          { label: "out (msg/s)", stroke: "#2bb673", width: 2 }],
        axes: [{ stroke: "#8a94a6" }, { stroke: "#8a94a6", size: 60 }],
        scales: { x: { time: true } },
      }, data, container);
    } else if (plot) {
      plot.setData(data);
    }
  }
  return { push, stop: () => plot && plot.destroy() };
}

function browser(topicPath, name) {
  const mode = h("select", { id: "browse-mode" }, h("option", { value: "offset" }, "from offset"),
    h("option", { value: "messageId" }, "from message id"), h("option", { value: "first" }, "from the first stored"));
  const at = h("input", { id: "browse-at", placeholder: "0", value: "0" });
  const count = h("input", { id: "browse-count", type: "number", value: "20", min: "1", max: "100" });
  const out = h("div", { id: "browse-results" }, h("p", { class: "muted" }, "Read messages by offset or message id; payloads are decoded by the topic's schema."));
  let next = null;
  async function read(fromId) {
    const q = new URLSearchParams({ count: count.value || "20" });
    if (fromId) q.set("messageId", fromId);
    else if (mode.value === "offset") q.set("offset", at.value.trim() || "0");
    else if (mode.value === "messageId") q.set("messageId", at.value.trim());
    try {
      const data = await get(`/console/api/messages/${topicPath}?` + q);
      next = data.next;
      out.replaceChildren(
        h("p", { class: "muted" }, `${data.messages.length} message(s) · schema ${data.schema || "none (bytes)"}`),
        table([
          { key: "messageId", label: "Message id", render: (m) => h("code", {}, m.messageId) },
          { key: "offset", label: "Offset", num: true, render: (m) => fmtNum(m.offset) },
          { key: "publishTime", label: "Published", render: (m) => fmtTime(m.publishTime) },
          { key: "key", label: "Key", render: (m) => m.key ?? h("span", { class: "muted" }, "–") },
          { key: "properties", label: "Properties", render: (m) => Object.keys(m.properties || {}).length
            ? h("code", { class: "props" }, Object.entries(m.properties).map(([k, v]) => `${k}=${v}`).join(", ")) : "–" },
          { key: "payload", label: "Payload", render: (m) => m.error ? h("span", { class: "error-text" }, m.error)
            : h("pre", { class: "payload", title: m.payload.note || m.payload.encoding },
              typeof m.payload.value === "string" ? m.payload.value : JSON.stringify(m.payload.value, null, 1)) },
        ], data.messages, { rowId: (m) => m.messageId, class: "messages", empty: "No stored message there." }),
        next ? h("button", { class: "small", id: "browse-next", onclick: () => read(next) }, "Next page ›") : "");
    } catch (e) {
      out.replaceChildren(h("p", { class: "notice error-text", id: "browse-error" }, (e.kind === "forbidden" ? "Not permitted: " : "Cannot read messages: ") + e.reason));
    }
  }
  const form = h("form", { class: "toolbar", id: "browse-form" }, mode, at, h("label", { class: "inline" }, "count ", count),
    h("button", { class: "primary", type: "submit", id: "browse-read" }, "Read"));
  form.addEventListener("submit", (e) => { e.preventDefault(); read(null); });
  return h("div", {}, form, out);
}

export function render({ rest }) {
  const name = rest.length >= 4 ? `${rest[0]}://${rest[1]}/${rest[2]}/${rest[3]}` : "";
  const topicPath = rest.slice(1, 4).map(enc).join("/");
  const el = h("div", { class: "page", id: "page-topic", "data-topic": name });
  const head = h("div", { class: "topic-head" });
  const cards = h("div", { class: "cards" });
  const chartBox = h("div", { class: "chart", id: "rate-chart" });
  const producers = h("div", { id: "producers" });
  const subs = h("div", { id: "subscriptions" });
  const partitions = h("div", { id: "partitions" });
  const chart = rateChart(chartBox);
  let built = false;
  el.append(h("p", { class: "crumbs" }, h("a", { href: "#/topics" }, "Topics"), " / ", shortTopic(name)), head);

  function build(detail) {
    if (detail.partitioned) {
      el.append(section("Partitions", partitions));
    } else {
      el.append(cards, section("Rates (live)", chartBox), section("Producers", producers), section("Subscriptions", subs),
        section("Messages", browser(topicPath, name)));
    }
    built = true;
  }

  function subAction(sub, kind) {
    const base = `/console/api/owner/${topicPath}/subscription/${enc(sub)}`;
    if (kind === "skip") {
      return act({ title: `Skip messages on ${sub}`, text: "The subscription's cursor moves past the next N messages; they are not delivered to it.",
        fields: [{ name: "n", label: "How many", value: "1", type: "number" }], confirm: "Skip", danger: true },
      (v) => ({ method: "POST", path: `${base}/skip/${enc(v.n)}`, success: `Skipped ${v.n} on ${sub}` }), refresh);
    }
    if (kind === "skip_all") {
      return act({ title: `Clear the backlog of ${sub}`, text: "Every message not yet acknowledged is skipped.", confirm: "Skip all", danger: true },
        () => ({ method: "POST", path: `${base}/skip_all`, success: `Backlog of ${sub} cleared` }), refresh);
    }
    return act({ title: `Reset the cursor of ${sub}`, text: "Consumers are sent the messages again from that point.",
      fields: [{ name: "to", label: "To", options: [{ value: "earliest", label: "the earliest message" }, { value: "latest", label: "the end (skip everything)" },
        { value: "id", label: "a message id (below)" }, { value: "time", label: "a publish time (below, ms since epoch)" }] },
      { name: "value", label: "Message id (L:E) or time (ms)", placeholder: "12:0" }], confirm: "Reset cursor", danger: true },
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
      partitions.replaceChildren(table([{ key: "name", label: "Partition", render: (p) => h("a", { href: topicHref(p.name) }, shortTopic(p.name)) }],
        d.partitions.map((p) => ({ name: p })), { class: "partitions" }));
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
      { key: "actions", label: "", render: (x) => h("span", { class: "row-actions" },
        h("button", { class: "small", "data-action": "skip", onclick: () => subAction(x.name, "skip") }, "Skip"),
        h("button", { class: "small", "data-action": "skip-all", onclick: () => subAction(x.name, "skip_all") }, "Skip all"),
        h("button", { class: "small", "data-action": "reset", onclick: () => subAction(x.name, "reset") }, "Reset cursor")) },
    ], Object.entries(s.subscriptions).map(([n, x]) => ({ name: n, ...x })), { rowId: (x) => x.name, class: "subscriptions", empty: "No subscription." }));
  }

  async function refresh() {
    const detail = await get(`/console/api/topic/${topicPath}`);
    if (!built) build(detail);
    draw(detail);
  }
  return { el, refresh, stop: chart.stop, title: shortTopic(name) };
}
