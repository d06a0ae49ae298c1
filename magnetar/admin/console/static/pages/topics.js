// Topics: every topic with rates, backlog, storage, producers and subscriptions;
// search, sort and paging run on the broker (fast at 10,000 topics).
import { get } from "../api.js";
import { act, enc } from "../actions.js";
import { fmtBytes, fmtNum, fmtRate, h, shortTopic, table, topicHref } from "../ui.js";

const PAGE = 50;

export function render({ params, navigate }) {
  const state = { q: params.get("q") || "", namespace: params.get("namespace") || "", sort: params.get("sort") || "name",
    order: params.get("order") || "asc", offset: Number(params.get("offset") || 0), flat: params.get("partitions") === "1" };
  let requests = 0;
  const el = h("div", { class: "page", id: "page-topics" });
  const results = h("div", { id: "topic-results" });
  const pager = h("div", { class: "pager", id: "pager" });
  const search = h("input", { id: "topic-search", type: "search", placeholder: "Search topics…", value: state.q });
  const nsSelect = h("select", { id: "topic-namespace" }, h("option", { value: "" }, "All namespaces"));
  let namespacesLoaded = false;
  let debounce;
  search.addEventListener("input", () => {
    clearTimeout(debounce);
    debounce = setTimeout(() => { state.q = search.value.trim(); state.offset = 0; refresh().catch(() => {}); }, 250);
  });
  const flat = h("input", { type: "checkbox", id: "show-partitions", checked: state.flat });
  flat.addEventListener("change", () => { state.flat = flat.checked; state.offset = 0; refresh().catch(() => {}); });
  nsSelect.addEventListener("change", () => { state.namespace = nsSelect.value; state.offset = 0; refresh().catch(() => {}); });
  const create = h("button", { class: "primary", id: "create-topic", onclick: () => act({
    title: "Create a topic",
    text: "A persistent topic; with partitions > 0 a partitioned topic.",
    fields: [
      { name: "namespace", label: "Namespace", value: state.namespace || "public/default", required: true },
      { name: "name", label: "Topic name", required: true, placeholder: "orders" },
      { name: "partitions", label: "Partitions", value: "0", type: "number" },
    ],
    confirm: "Create topic",
    validate: (v) => {
      if (!/^[^/\s]+\/[^/\s]+$/.test(v.namespace)) return `“${v.namespace}” is not a namespace: write tenant/namespace, e.g. public/default.`;
      if (!/^[A-Za-z0-9_.=:\-]+$/.test(v.name)) return `“${v.name}” is not a topic name: letters, digits, and _ . = : - only.`;
      if (!/^\d+$/.test(v.partitions || "0") || Number(v.partitions) > 10000) return "Partitions must be a whole number from 0 to 10,000.";
      return null;
    },
  }, (v) => {
    const n = Number(v.partitions || 0);
    const path = `/admin/v2/persistent/${v.namespace}/${enc(v.name)}` + (n > 0 ? "/partitions" : "");
    return { method: "PUT", path, body: n > 0 ? n : undefined, success: `Created persistent://${v.namespace}/${v.name}` };
  }, refresh) }, "Create topic");
  el.append(h("h1", {}, "Topics"), h("div", { class: "toolbar" }, search, nsSelect,
    h("label", { class: "inline" }, flat, " partitions as rows"), h("span", { class: "spacer" }), create),
    results, pager);

  function sortBy(key) {
    if (state.sort === key) state.order = state.order === "asc" ? "desc" : "asc";
    else { state.sort = key; state.order = key === "name" ? "asc" : "desc"; }
    state.offset = 0;
    refresh().catch(() => {});
  }

  async function loadNamespaces() {
    if (namespacesLoaded) return;
    const overview = await get("/console/api/overview");
    for (const ns of overview.namespaces) nsSelect.append(h("option", { value: ns.name, selected: ns.name === state.namespace }, ns.name));
    namespacesLoaded = true;
  }

  async function refresh() {
    await loadNamespaces();
    const q = new URLSearchParams({ sort: state.sort, order: state.order, offset: state.offset, limit: PAGE });
    if (state.q) q.set("q", state.q);
    if (state.namespace) q.set("namespace", state.namespace);
    if (state.flat) q.set("partitions", "1");
    const asked = ++requests;
    const data = await get("/console/api/topics?" + q);
    if (asked !== requests) return;  // a newer request (a click, a search) was sent meanwhile: its answer is drawn
    const unreachable = Object.entries(data.unreachable || {});
    results.replaceChildren(
      unreachable.length ? h("p", { class: "notice" }, "No figures from: " + unreachable.map(([b, r]) => `${b} (${r})`).join("; ")) : "",
      table([
        { key: "name", label: "Topic", render: (t) => h("span", {}, h("a", { href: topicHref(t.name) }, shortTopic(t.name)),
          t.partitions ? h("span", { class: "badge partitioned" }, `${t.partitions} partitions`) : "") },
        { key: "msgRateIn", label: "Rate in", num: true, render: (t) => fmtRate(t.msgRateIn) },
        { key: "msgRateOut", label: "Rate out", num: true, render: (t) => fmtRate(t.msgRateOut) },
        { key: "backlog", label: "Backlog", num: true, render: (t) => fmtNum(t.backlog) },
        { key: "storageSize", label: "Storage", num: true, render: (t) => fmtBytes(t.storageSize) },
        { key: "producers", label: "Producers", num: true, render: (t) => fmtNum(t.producers) },
        { key: "subscriptions", label: "Subscriptions", num: true, render: (t) => fmtNum(t.subscriptions) },
        { key: "owner", label: "Broker", sortable: false, render: (t) => t.owner || h("span", { class: "muted" }, t.partitions ? "no partition loaded" : "not loaded") },
      ], data.topics, { sort: { key: state.sort, order: state.order }, onSort: sortBy, rowId: (t) => t.name, class: "topics",
        empty: state.q ? `No topic matches “${state.q}”.` : "No topics yet: create one, or produce to one." }));
    const last = Math.min(data.total, state.offset + data.topics.length);
    pager.replaceChildren(
      h("span", { id: "topic-count" }, data.total ? `${fmtNum(state.offset + 1)}–${fmtNum(last)} of ${fmtNum(data.total)} topics` : "0 topics"),
      h("button", { class: "small", id: "prev-page", disabled: state.offset === 0, onclick: () => { state.offset = Math.max(0, state.offset - PAGE); refresh().catch(() => {}); } }, "‹ Previous"),
      h("button", { class: "small", id: "next-page", disabled: last >= data.total, onclick: () => { state.offset += PAGE; refresh().catch(() => {}); } }, "Next ›"));
  }
  return { el, refresh, title: "Topics" };
}
