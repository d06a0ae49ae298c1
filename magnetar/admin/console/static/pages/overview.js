// Overview: brokers (leader, load, CPU, memory) and every namespace's bundles, live.
import { get } from "../api.js";
import { act, enc } from "../actions.js";
import { card, fmtBytes, fmtNum, fmtRate, h, section, stateBadge, table } from "../ui.js";

const PALETTE = ["#4f8cff", "#2bb673", "#f29e38", "#b86bff", "#ef5b7b", "#1fb5c9", "#c7b730", "#8a94a6"];

export function brokerColor(brokers, id) {
  const i = brokers.findIndex((b) => b.id === id);
  return i < 0 ? "#cfd5df" : PALETTE[i % PALETTE.length];
}

function bar(fraction, label) {
  const pct = Math.max(0, Math.min(1, fraction || 0)) * 100;
  return h("div", { class: "meter", title: label }, h("div", { class: "meter-fill", style: `width:${pct.toFixed(1)}%` }),
    h("span", {}, label));
}

function rangeWidth(range) {
  const [lo, hi] = range.split("_").map((x) => parseInt(x, 16));
  return (hi - lo) / 0xffffffff;
}

export function render() {
  const el = h("div", { class: "page", id: "page-overview" });
  const events = [];
  let last = null;
  let data = null;

  function recordChanges(next) {
    if (!last) return;
    const before = new Map();
    for (const ns of last.namespaces) for (const b of ns.bundles) before.set(ns.name + "/" + b.range, b);
    const time = new Date().toLocaleTimeString();
    for (const ns of next.namespaces) {
      const names = new Set(ns.bundles.map((b) => ns.name + "/" + b.range));
      for (const b of ns.bundles) {
        const key = ns.name + "/" + b.range;
        const old = before.get(key);
        if (!old) events.unshift(`${time}  ${key}: new bundle (${b.state}${b.owner ? " on " + b.owner : ""})`);
        else if (old.state !== b.state || old.owner !== b.owner) {
          events.unshift(`${time}  ${key}: ${old.state} ${old.owner || ""} → ${b.state} ${b.owner || ""}`);
        }
      }
      for (const k of before.keys()) if (k.startsWith(ns.name + "/0x") && !names.has(k)) events.unshift(`${time}  ${k}: split or gone`);
    }
    events.splice(30);
  }

  function bundleActions(ns, b) {
    const brokers = data.brokers.map((x) => x.id);
    return h("span", { class: "row-actions" },
      h("button", { class: "small", "data-action": "move", onclick: () => act({
        title: "Move bundle " + b.range,
        text: `Move ${ns.name} bundle ${b.range} from ${b.owner || "nobody"} to another broker. Its clients follow without a lookup.`,
        fields: [{ name: "destination", label: "Destination broker", options: [{ value: "", label: "least loaded (leader picks)" },
          ...brokers.filter((x) => x !== b.owner)] }],
        confirm: "Move bundle",
      }, (v) => ({ method: "PUT", path: `/admin/v2/namespaces/${ns.name}/${b.range}/unload` +
          (v.destination ? "?destinationBroker=" + enc(v.destination) : ""), success: `Bundle ${b.range} is moving` }), refresh) }, "Move"),
      h("button", { class: "small", "data-action": "split", onclick: () => act({
        title: "Split bundle " + b.range,
        text: `Split ${ns.name} bundle ${b.range} in two; its owner keeps both halves and their clients.`,
        fields: [{ name: "algorithm", label: "Cut", options: ["range_equally_divide", "topic_count_equally_divide"] }],
        confirm: "Split bundle",
      }, (v) => ({ method: "PUT", path: `/admin/v2/namespaces/${ns.name}/${b.range}/split?splitAlgorithmName=${v.algorithm}`,
        success: `Bundle ${b.range} split` }), refresh) }, "Split"));
  }

  function draw() {
    const totalIn = data.brokers.reduce((s, b) => s + (b.msg_rate_in || 0), 0);
    const totalOut = data.brokers.reduce((s, b) => s + (b.msg_rate_out || 0), 0);
    const topics = data.brokers.reduce((s, b) => s + (b.topics || 0), 0);
    const bundles = data.namespaces.reduce((s, n) => s + n.bundles.length, 0);
    const cards = h("div", { class: "cards" },
      card("Cluster", data.cluster, data.standalone ? "standalone broker" : data.brokers.length + " brokers live"),
      card("Leader", data.leader || "electing…"),
      card("Messages in", fmtRate(totalIn)), card("Messages out", fmtRate(totalOut)),
      card("Loaded topics", fmtNum(topics)), card("Bundles", fmtNum(bundles), data.namespaces.length + " namespaces"));
    const brokers = table([
      { key: "id", label: "Broker", render: (b) => h("span", {}, h("span", { class: "swatch", style: "background:" + brokerColor(data.brokers, b.id) }), b.id,
        b.leader ? h("span", { class: "badge leader" }, "leader") : null) },
      { key: "cpu", label: "CPU", render: (b) => b.cpu === undefined || b.cpu === null ? "–" :
        bar(b.cpu / (b.cpu_cores || 1), `${(b.cpu * 100).toFixed(0)}% of a core · ${b.cpu_cores} cores`) },
      { key: "memory_rss", label: "Memory", render: (b) => b.memory_rss ? bar(b.memory_rss / b.memory_total,
        `${fmtBytes(b.memory_rss)} of ${fmtBytes(b.memory_total)}`) : "–" },
      { key: "msg_rate_in", label: "In", num: true, render: (b) => fmtRate(b.msg_rate_in) },
      { key: "msg_rate_out", label: "Out", num: true, render: (b) => fmtRate(b.msg_rate_out) },
      { key: "bundles", label: "Bundles", num: true, render: (b) => fmtNum(b.bundles.length) },
      { key: "topics", label: "Topics", num: true, render: (b) => fmtNum(b.topics) },
    ], data.brokers, { rowId: (b) => b.id, class: "brokers" });
    const nsPanels = data.namespaces.map((ns) => h("div", { class: "namespace", "data-namespace": ns.name },
      h("h3", {}, ns.name, h("span", { class: "muted" }, ` · ${ns.bundles.length} bundle${ns.bundles.length === 1 ? "" : "s"}`)),
      h("div", { class: "bundle-map" }, ns.bundles.map((b) => h("div", {
        class: "bundle-seg state-" + String(b.state).toLowerCase(), title: `${b.range} · ${b.state} · ${b.owner || "unowned"}`,
        style: `flex-grow:${rangeWidth(b.range)};background:${brokerColor(data.brokers, b.owner)}` }))),
      table([
        { key: "range", label: "Bundle", render: (b) => h("code", {}, b.range) },
        { key: "state", label: "State", render: (b) => stateBadge(b.state) },
        { key: "owner", label: "Owner", render: (b) => b.owner ? h("span", { class: "owner" },
          h("span", { class: "swatch", style: "background:" + brokerColor(data.brokers, b.owner) }), b.owner) : h("span", { class: "muted" }, "unowned") },
        { key: "actions", label: "", render: (b) => bundleActions(ns, b) },
      ], ns.bundles, { rowId: (b) => ns.name + "/" + b.range, class: "bundles" })));
    el.replaceChildren(
      h("h1", {}, "Overview"), cards,
      section("Brokers", brokers),
      section("Bundles", nsPanels.length ? nsPanels : h("p", { class: "muted" }, "No namespace you may read.")),
      section("Ownership changes (seen by this page)", events.length
        ? h("ul", { class: "events", id: "events" }, events.map((e) => h("li", {}, e)))
        : h("p", { class: "muted", id: "events" }, "No move or split since this page opened.")));
  }

  async function refresh() {
    const next = await get("/console/api/overview");
    recordChanges(next);
    last = data = next;
    draw();
  }
  return { el, refresh, title: "Overview" };
}
