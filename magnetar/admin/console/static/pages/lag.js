// Consumer lag: every durable subscription of every readable topic with its backlog,
// consumers and unacknowledged messages; sorted, searched and paged on the broker.
import { get } from "../api.js";
import { fmtNum, fmtRate, fmtTime, h, shortTopic, table, topicHref } from "../ui.js";

const PAGE = 50;

export function render({ params }) {
  const state = { q: params.get("q") || "", namespace: params.get("namespace") || "", sort: params.get("sort") || "backlog",
    order: params.get("order") || "desc", offset: 0 };
  let requests = 0;
  const el = h("div", { class: "page", id: "page-lag" });
  const results = h("div", { id: "lag-results" });
  const pager = h("div", { class: "pager", id: "lag-pager" });
  const search = h("input", { id: "lag-search", type: "search", placeholder: "Search topic or subscription…", value: state.q });
  let debounce;
  search.addEventListener("input", () => {
    clearTimeout(debounce);
    debounce = setTimeout(() => { state.q = search.value.trim(); state.offset = 0; refresh().catch(() => {}); }, 250);
  });
  el.append(h("h1", {}, "Consumer lag"),
    h("p", { class: "muted" }, "Every subscription's backlog: messages stored and not yet acknowledged. Topics not loaded on any broker are not listed."),
    h("div", { class: "toolbar" }, search, h("span", { class: "spacer" }), h("span", { id: "lag-total" })), results, pager);

  function sortBy(key) {
    if (state.sort === key) state.order = state.order === "asc" ? "desc" : "asc";
    else { state.sort = key; state.order = key === "topic" || key === "subscription" ? "asc" : "desc"; }
    state.offset = 0;
    refresh().catch(() => {});
  }

  async function refresh() {
    const q = new URLSearchParams({ sort: state.sort, order: state.order, offset: state.offset, limit: PAGE });
    if (state.q) q.set("q", state.q);
    if (state.namespace) q.set("namespace", state.namespace);
    const asked = ++requests;
    const data = await get("/console/api/subscriptions?" + q);
    if (asked !== requests) return;  // a newer request (a click, a search) was sent meanwhile: its answer is drawn
    const unreachable = Object.entries(data.unreachable || {});
    document.getElementById("lag-total")?.replaceChildren("Total backlog: ", h("strong", {}, fmtNum(data.totalBacklog)));
    results.replaceChildren(
      unreachable.length ? h("p", { class: "notice" }, "No figures from: " + unreachable.map(([b, r]) => `${b} (${r})`).join("; ")) : "",
      table([
        { key: "topic", label: "Topic", render: (r) => h("span", {}, h("a", { href: topicHref(r.topic) }, shortTopic(r.topic)),
          r.parent ? h("a", { class: "badge partitioned", href: topicHref(r.parent) }, "of " + shortTopic(r.parent).split("/").pop()) : "") },
        { key: "subscription", label: "Subscription" },
        { key: "type", label: "Type", sortable: false, render: (r) => h("span", { class: "badge" }, r.type) },
        { key: "backlog", label: "Backlog", num: true, render: (r) => fmtNum(r.backlog) },
        { key: "consumers", label: "Consumers", num: true, render: (r) => fmtNum(r.consumers) },
        { key: "unacked", label: "Unacked", num: true, render: (r) => fmtNum(r.unacked) },
        { key: "msgRateOut", label: "Rate out", num: true, render: (r) => fmtRate(r.msgRateOut) },
        { key: "ackRate", label: "Acks", num: true, render: (r) => fmtRate(r.ackRate) },
        { key: "lastAcked", label: "Last ack", render: (r) => r.lastAcked ? fmtTime(r.lastAcked) : h("span", { class: "muted" }, "never") },
        { key: "delivered", label: "Delivered", num: true, render: (r) => fmtNum(r.delivered) },
        { key: "owner", label: "Broker", sortable: false },
      ], data.subscriptions, { sort: { key: state.sort, order: state.order }, onSort: sortBy, rowId: (r) => `${r.topic} ${r.subscription}`,
        class: "lag", empty: state.q ? `No subscription matches “${state.q}”.` : "No subscription on a loaded topic." }));
    const last = Math.min(data.total, state.offset + data.subscriptions.length);
    pager.replaceChildren(
      h("span", { id: "lag-count" }, data.total ? `${fmtNum(state.offset + 1)}–${fmtNum(last)} of ${fmtNum(data.total)} subscriptions` : "0 subscriptions"),
      h("button", { class: "small", id: "lag-prev", disabled: state.offset === 0, onclick: () => { state.offset = Math.max(0, state.offset - PAGE); refresh().catch(() => {}); } }, "‹ Previous"),
      h("button", { class: "small", id: "lag-next", disabled: last >= data.total, onclick: () => { state.offset += PAGE; refresh().catch(() => {}); } }, "Next ›"));
  }
  return { el, refresh, title: "Consumer lag" };
}
