// Regions: replication towards each remote (backlog, rate, connection) and replicated subscriptions.
import { get } from "../api.js";
import { fmtNum, fmtRate, h, section, shortTopic, table, topicHref } from "../ui.js";

export function render() {
  const el = h("div", { class: "page", id: "page-regions" });
  const clustersBox = h("div", { id: "clusters" });
  const repl = h("div", { id: "replication" });
  el.append(h("h1", {}, "Regions"), section("Clusters", clustersBox), section("Replication by topic", repl));

  async function refresh() {
    let clusters = [];
    try { clusters = await get("/admin/v2/clusters"); } catch { clusters = []; }
    const overview = await get("/console/api/overview");
    const data = await get("/console/api/topics?replicated=1&partitions=1&limit=500&sort=name");
    clustersBox.replaceChildren(h("p", {}, "This broker is in ", h("strong", {}, overview.cluster), ". Clusters known: ",
      clusters.map((c) => h("span", { class: "badge" + (c === overview.cluster ? " leader" : "") }, c))));
    const rows = [];
    for (const t of data.topics) {
      for (const [remote, r] of Object.entries(t.replication || {})) {
        rows.push({ topic: t.name, remote, ...r, replicatedSubscriptions: t.replicatedSubscriptions || [], rate: t.msgRateIn });
      }
    }
    repl.replaceChildren(table([
      { key: "topic", label: "Topic", render: (r) => h("a", { href: topicHref(r.topic) }, shortTopic(r.topic)) },
      { key: "remote", label: "To", render: (r) => h("span", { class: "badge" }, r.remote) },
      { key: "connected", label: "Connected", render: (r) => r.connected ? h("span", { class: "badge ok" }, "yes") : h("span", { class: "badge bad" }, "no") },
      { key: "replicationBacklog", label: "Backlog", num: true, render: (r) => fmtNum(r.replicationBacklog) },
      { key: "lag", label: "Lag (est.)", num: true, render: (r) => !r.replicationBacklog ? "0 s"
        : r.msgRateOut > 0 ? (r.replicationBacklog / r.msgRateOut).toFixed(1) + " s" : "stalled" },
      { key: "msgRateOut", label: "Rate", num: true, render: (r) => fmtRate(r.msgRateOut) },
      { key: "replicatedSubscriptions", label: "Replicated subscriptions", render: (r) => r.replicatedSubscriptions.join(", ") || "–" },
    ], rows, { rowId: (r) => r.topic + "→" + r.remote, class: "replication",
      empty: "No topic replicates from this cluster: set a namespace's replication clusters to two or more regions." }));
  }
  return { el, refresh, title: "Regions" };
}
