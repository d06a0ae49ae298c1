// Tenants and namespaces with their policies and permissions; create and grant.
import { get } from "../api.js";
import { act, enc } from "../actions.js";
import { h, section, table } from "../ui.js";

const ACTIONS = ["produce", "consume", "functions", "sources", "sinks", "packages"];
const SHOWN = ["replication_clusters", "retention_policies", "message_ttl_in_seconds", "deduplicationEnabled",
  "backlog_quota_map", "bundles"];

function policySummary(p) {
  const parts = [];
  for (const [k, v] of Object.entries(p || {})) {
    if (k === "auth_policies" || v === null || v === undefined) continue;
    if (typeof v === "object" && !Array.isArray(v) && Object.keys(v).length === 0) continue;
    if (Array.isArray(v) && v.length === 0) continue;
    parts.push([k, v]);
  }
  parts.sort((a, b) => (SHOWN.indexOf(a[0]) + 1 || 99) - (SHOWN.indexOf(b[0]) + 1 || 99));
  return parts.length ? h("dl", { class: "policies" }, parts.map(([k, v]) => [h("dt", {}, k),
    h("dd", {}, h("code", {}, typeof v === "object" ? JSON.stringify(v) : String(v)))])) : h("span", { class: "muted" }, "defaults");
}

export function render() {
  const el = h("div", { class: "page", id: "page-tenants" });
  const body = h("div", { id: "tenant-list" });
  let clusters = [];
  const toolbar = h("div", { class: "toolbar" }, h("span", { class: "spacer" }),
    h("button", { class: "primary", id: "create-tenant", onclick: () => act({
      title: "Create a tenant", fields: [
        { name: "tenant", label: "Tenant", required: true, placeholder: "acme" },
        { name: "adminRoles", label: "Admin roles (comma separated)", placeholder: "acme-admin" },
        { name: "allowedClusters", label: "Allowed clusters (comma separated)", value: clusters.join(",") }],
      confirm: "Create tenant",
    }, (v) => ({ method: "PUT", path: `/admin/v2/tenants/${enc(v.tenant)}`, success: `Tenant ${v.tenant} created`,
      body: { adminRoles: split(v.adminRoles), allowedClusters: split(v.allowedClusters) } }), refresh) }, "Create tenant"),
    h("button", { class: "secondary", id: "create-namespace", onclick: () => act({
      title: "Create a namespace", fields: [{ name: "namespace", label: "Namespace (tenant/name)", required: true, placeholder: "acme/orders" }],
      confirm: "Create namespace",
    }, (v) => ({ method: "PUT", path: `/admin/v2/namespaces/${v.namespace}`, success: `Namespace ${v.namespace} created` }), refresh) }, "Create namespace"));
  el.append(h("h1", {}, "Tenants & namespaces"), toolbar, body);

  function split(s) { return (s || "").split(",").map((x) => x.trim()).filter(Boolean); }

  function grant(namespace) {
    return act({ title: `Grant a permission on ${namespace}`, fields: [
      { name: "role", label: "Role", required: true, placeholder: "app-1" },
      { name: "actions", label: "Actions", checkboxes: ACTIONS, value: ["produce", "consume"] }],
    confirm: "Grant",
    }, (v) => ({ method: "POST", path: `/admin/v2/namespaces/${namespace}/permissions/${enc(v.role)}`, body: v.actions,
      success: `Granted ${v.actions.join(", ")} on ${namespace} to ${v.role}` }), refresh);
  }

  async function refresh() {
    const overview = await get("/console/api/overview");
    try { clusters = await get("/admin/v2/clusters"); } catch { clusters = []; }
    const byTenant = new Map();
    try { for (const t of await get("/admin/v2/tenants")) byTenant.set(t, []); } catch { /* not a super-user: readable ones */ }
    for (const ns of overview.namespaces) {
      const t = ns.name.split("/")[0];
      if (!byTenant.has(t)) byTenant.set(t, []);
      byTenant.get(t).push(ns.name);
    }
    const blocks = [];
    for (const [tenant, namespaces] of [...byTenant.entries()].sort()) {
      let info = {};
      try { info = await get(`/admin/v2/tenants/${enc(tenant)}`); } catch (e) { info = { error: e.reason }; }
      const rows = [];
      for (const ns of namespaces.sort()) {
        let policies = {}, perms = {};
        try { policies = await get(`/admin/v2/namespaces/${ns}`); } catch (e) { policies = { error: e.reason }; }
        try { perms = await get(`/admin/v2/namespaces/${ns}/permissions`); } catch { perms = null; }
        rows.push({ ns, policies, perms });
      }
      blocks.push(h("div", { class: "tenant", "data-tenant": tenant },
        h("h3", {}, tenant),
        h("p", { class: "muted" }, info.error ? info.error : `admin roles: ${(info.adminRoles || []).join(", ") || "none"} · allowed clusters: ${(info.allowedClusters || []).join(", ") || "none"}`),
        table([
          { key: "ns", label: "Namespace", render: (r) => h("a", { href: "#/topics?namespace=" + enc(r.ns) }, r.ns) },
          { key: "policies", label: "Policies", render: (r) => policySummary(r.policies) },
          { key: "perms", label: "Permissions", render: (r) => r.perms === null ? h("span", { class: "muted" }, "not visible to you")
            : Object.keys(r.perms).length ? h("ul", { class: "perms" }, Object.entries(r.perms).map(([role, a]) => h("li", {}, h("strong", {}, role), ": " + a.join(", "))))
              : h("span", { class: "muted" }, "none") },
          { key: "actions", label: "", render: (r) => h("button", { class: "small", "data-action": "grant", onclick: () => grant(r.ns) }, "Grant…") },
        ], rows, { rowId: (r) => r.ns, class: "namespaces", empty: "No namespace." })));
    }
    body.replaceChildren(...(blocks.length ? blocks : [h("p", { class: "muted" }, "No tenant you may read.")]));
  }
  return { el, refresh, title: "Tenants", pollMs: 5000 };
}
