// Tenants and namespaces with their policies (as fields, editable) and permissions; create and grant.
import { get } from "../api.js";
import { act, enc } from "../actions.js";
import { policyFields, editPolicies } from "../policies.js";
import { h, table } from "../ui.js";

const ACTIONS = ["produce", "consume", "functions", "sources", "sinks", "packages"];
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
      validate: (v) => /^[A-Za-z0-9_.=:\-]+$/.test(v.tenant) ? null : `“${v.tenant}” is not a tenant name: letters, digits, and _ . = : - only.`,
    }, (v) => ({ method: "PUT", path: `/admin/v2/tenants/${enc(v.tenant)}`, success: `Tenant ${v.tenant} created`,
      body: { adminRoles: split(v.adminRoles), allowedClusters: split(v.allowedClusters) } }), refresh) }, "Create tenant"),
    h("button", { class: "secondary", id: "create-namespace", onclick: () => act({
      title: "Create a namespace", fields: [{ name: "namespace", label: "Namespace (tenant/name)", required: true, placeholder: "acme/orders" }],
      confirm: "Create namespace",
      validate: (v) => /^[A-Za-z0-9_.=:\-]+\/[A-Za-z0-9_.=:\-]+$/.test(v.namespace) ? null
        : `“${v.namespace}” is not a namespace: write tenant/name, e.g. acme/orders.`,
    }, (v) => ({ method: "PUT", path: `/admin/v2/namespaces/${v.namespace}`, success: `Namespace ${v.namespace} created` }), refresh) }, "Create namespace"));
  el.append(h("h1", {}, "Tenants & namespaces"), toolbar, body);

  function split(s) { return (s || "").split(",").map((x) => x.trim()).filter(Boolean); }

  function grant(namespace) {
    return act({ title: `Grant a permission on ${namespace}`, fields: [
      { name: "role", label: "Role", required: true, placeholder: "app-1" },
      { name: "actions", label: "Actions", checkboxes: ACTIONS, value: ["produce", "consume"] }],
    confirm: "Grant",
    validate: (v) => !v.role ? "Name the role to grant to." : v.actions.length ? null : "Tick at least one action.",
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
          { key: "policies", label: "Policies", render: (r) => r.policies.error ? h("span", { class: "muted" }, r.policies.error) : policyFields(r.policies) },
          { key: "perms", label: "Permissions", render: (r) => r.perms === null ? h("span", { class: "muted" }, "not visible to you")
            : Object.keys(r.perms).length ? h("ul", { class: "perms" }, Object.entries(r.perms).map(([role, a]) => h("li", {}, h("strong", {}, role), ": " + a.join(", "))))
              : h("span", { class: "muted" }, "none") },
          { key: "actions", label: "", render: (r) => h("span", { class: "row-actions" },
            h("button", { class: "small", "data-action": "policies", disabled: !!r.policies.error, onclick: () => editPolicies(r.ns, r.policies, refresh) }, "Edit policies…"),
            h("button", { class: "small", "data-action": "grant", onclick: () => grant(r.ns) }, "Grant…")) },
        ], rows, { rowId: (r) => r.ns, class: "namespaces", empty: "No namespace." })));
    }
    body.replaceChildren(...(blocks.length ? blocks : [h("p", { class: "muted" }, "No tenant you may read.")]));
  }
  return { el, refresh, title: "Tenants", pollMs: 5000 };
}
