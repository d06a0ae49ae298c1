// A namespace's policies as fields: shown compactly, edited in a form, the changes
// listed for confirmation, then applied one by one through the admin API's
// /admin/v2/namespaces/{ns}/{retention,messageTTL,deduplication,backlogQuota,publishRate,dispatchRate,storageProfile}.
import { call, get } from "./api.js";
import { confirmDialog, fmtNum, h, toast } from "./ui.js";

const QUOTA_POLICIES = ["producer_request_hold", "producer_exception", "consumer_backlog_eviction"];
const MiB = 1024 * 1024;

const limit = (v, unit) => v === undefined || v === null ? null : v < 0 ? "no limit" : `${fmtNum(v)} ${unit}`;
const rate = (v, unit) => v === undefined || v === null || v <= 0 ? null : `${fmtNum(v)} ${unit}`;

// {field: "text"} of what is set; fields at the broker default are left out.
export function describe(p) {
  const out = {};
  const r = p.retention_policies;
  if (r) out.retention = r.retentionTimeInMinutes === 0 && r.retentionSizeInMB === 0 ? "none"
    : `${limit(r.retentionTimeInMinutes, "min")}, ${limit(r.retentionSizeInMB, "MB")}`;
  if (p.message_ttl_in_seconds !== undefined && p.message_ttl_in_seconds !== null) {
    out.TTL = p.message_ttl_in_seconds === 0 ? "never expire" : `${fmtNum(p.message_ttl_in_seconds)} s`;
  }
  if (typeof p.deduplicationEnabled === "boolean") out.deduplication = p.deduplicationEnabled ? "on" : "off";
  const q = p.backlog_quota_map || {};
  if (q.destination_storage) out["backlog quota"] = `${limit(q.destination_storage.limitSize >= 0 ? q.destination_storage.limitSize / MiB : -1, "MiB")} · ${q.destination_storage.policy}`;
  if (q.message_age) out["backlog age quota"] = `${limit(q.message_age.limitTime, "s")} · ${q.message_age.policy}`;
  const pr = p.publish_rate;
  if (pr) out["publish rate"] = [rate(pr.publishThrottlingRateInMsg, "msg/s"), rate(pr.publishThrottlingRateInByte, "B/s")].filter(Boolean).join(", ") || "no limit";
  const dr = p.dispatch_rate;
  if (dr) out["dispatch rate"] = [rate(dr.dispatchThrottlingRateInMsg, "msg"), rate(dr.dispatchThrottlingRateInByte, "B")].filter(Boolean).join(", ")
    + (dr.ratePeriodInSecond && (dr.dispatchThrottlingRateInMsg > 0 || dr.dispatchThrottlingRateInByte > 0) ? ` per ${dr.ratePeriodInSecond} s` : "no limit");
  if (Array.isArray(p.replication_clusters) && p.replication_clusters.length) out.replication = p.replication_clusters.join(", ");
  if (p.bundles && p.bundles.numBundles) out.bundles = String(p.bundles.numBundles);
  if (p.storage_profile) out["storage profile"] = p.storage_profile;
  return out;
}

export function policyFields(p) {
  const d = describe(p);
  const entries = Object.entries(d);
  if (!entries.length) return h("span", { class: "muted" }, "broker defaults");
  return h("dl", { class: "policies" }, entries.map(([k, v]) => [h("dt", {}, k), h("dd", { "data-policy": k }, v)]));
}

// The form's text for a value (empty: the broker default).
const text = (v) => v === undefined || v === null ? "" : String(v);

// The storage profile's choices; `storage`: the broker's [storage] settings when readable
// (the empty choice then names the broker's own profile).
function profileOptions(storage) {
  const own = storage && storage.object_storage_profile ? ` (${storage.object_storage_profile})` : "";
  return [{ value: "", label: "broker default" + own }, { value: "latency", label: "latency: commit at once" },
    { value: "cost", label: "cost: gather up to the commit interval" }];
}

function formFields(p, storage) {
  const r = p.retention_policies || {};
  const q = p.backlog_quota_map || {};
  const size = q.destination_storage ? (q.destination_storage.limitSize < 0 ? -1 : q.destination_storage.limitSize / MiB) : null;
  const pr = p.publish_rate || {};
  const dr = p.dispatch_rate || {};
  const hint = "Empty: the broker's default. -1: no limit.";
  return [
    { name: "retentionMinutes", label: "Retention: time (minutes)", value: text(r.retentionTimeInMinutes), help: "Kept after acknowledgement. Both 0: none. " + hint },
    { name: "retentionMB", label: "Retention: size (MB)", value: text(r.retentionSizeInMB) },
    { name: "ttl", label: "Message TTL (seconds)", value: text(p.message_ttl_in_seconds), help: "Unacknowledged messages older than this are acknowledged for the consumers. 0: never." },
    { name: "dedup", label: "Deduplication", value: typeof p.deduplicationEnabled === "boolean" ? String(p.deduplicationEnabled) : "",
      options: [{ value: "", label: "broker default" }, { value: "true", label: "on" }, { value: "false", label: "off" }] },
    { name: "quotaMiB", label: "Backlog quota: size (MiB)", value: text(size), help: hint },
    { name: "quotaAge", label: "Backlog quota: age (seconds)", value: text(q.message_age ? q.message_age.limitTime : null) },
    { name: "quotaPolicy", label: "Backlog quota: when exceeded", value: (q.destination_storage || q.message_age || {}).policy || "producer_request_hold", options: QUOTA_POLICIES },
    { name: "publishMsg", label: "Publish rate: messages/s per topic", value: text(pr.publishThrottlingRateInMsg), help: hint },
    { name: "publishBytes", label: "Publish rate: bytes/s per topic", value: text(pr.publishThrottlingRateInByte) },
    { name: "dispatchMsg", label: "Dispatch rate: messages per period per topic", value: text(dr.dispatchThrottlingRateInMsg), help: hint },
    { name: "dispatchBytes", label: "Dispatch rate: bytes per period per topic", value: text(dr.dispatchThrottlingRateInByte) },
    { name: "dispatchPeriod", label: "Dispatch rate: period (seconds)", value: text(dr.ratePeriodInSecond ?? 1) },
    { name: "storageProfile", label: "Storage profile (object storage)", value: text(p.storage_profile), options: profileOptions(storage),
      help: (storage && storage.backend && storage.backend !== "object" ? "This broker stores on files: the profile applies on object storage only. " : "")
        + "Applies at once to the namespace's loaded topics." },
  ];
}

// The integer in a field: null when empty; throws an Error naming the field otherwise.
function int(values, name, label, min) {
  const raw = (values[name] || "").trim();
  if (raw === "") return null;
  if (!/^-?\d+$/.test(raw)) throw new Error(`${label}: “${raw}” is not a whole number.`);
  const n = Number(raw);
  if (n < min) throw new Error(`${label}: must be ${min} or more, got ${n}.`);
  return n;
}

// The admin calls that make the namespace's policies what the form says: [{what, method, path, body}].
export function changes(ns, p, v) {
  const base = `/admin/v2/namespaces/${ns}`;
  const out = [];
  const same = (a, b) => JSON.stringify(a ?? null) === JSON.stringify(b ?? null);
  // key: the field's name in describe(); field: the policies' field; wanted null: back to the broker default.
  const put = (key, suffix, field, current, wanted, query = "", sub = null) => {
    if (same(current, wanted)) return;
    const next = { ...p };
    if (sub) next[field] = { ...(p[field] || {}), [sub]: wanted ?? undefined };
    else next[field] = wanted;
    const before = describe(p)[key] ?? "broker default", after = describe(next)[key] ?? "broker default";
    const what = `${key}: ${before} → ${after}`;
    out.push(wanted === null ? { what, method: "DELETE", path: `${base}/${suffix}${query}` }
      : { what, method: "POST", path: `${base}/${suffix}${query}`, body: wanted });
  };
  const minutes = int(v, "retentionMinutes", "Retention time", -1), mb = int(v, "retentionMB", "Retention size", -1);
  if ((minutes === null) !== (mb === null)) throw new Error("Retention needs both a time and a size (-1: no limit), or neither.");
  if (minutes !== null && (minutes === 0) !== (mb === 0)) throw new Error("Retention: both 0 (none) or neither 0 (use -1 for no limit).");
  put("retention", "retention", "retention_policies", p.retention_policies, minutes === null ? null : { retentionTimeInMinutes: minutes, retentionSizeInMB: mb });
  put("TTL", "messageTTL", "message_ttl_in_seconds", p.message_ttl_in_seconds, int(v, "ttl", "Message TTL", 0));
  put("deduplication", "deduplication", "deduplicationEnabled", p.deduplicationEnabled, v.dedup === "" ? null : v.dedup === "true");
  const q = p.backlog_quota_map || {};
  const mib = int(v, "quotaMiB", "Backlog quota size", -1), age = int(v, "quotaAge", "Backlog quota age", -1);
  put("backlog quota", "backlogQuota", "backlog_quota_map", q.destination_storage || null,
    mib === null ? null : { limitSize: mib < 0 ? -1 : mib * MiB, limitTime: -1, policy: v.quotaPolicy }, "?backlogQuotaType=destination_storage",
    "destination_storage");
  put("backlog age quota", "backlogQuota", "backlog_quota_map", q.message_age || null,
    age === null ? null : { limitSize: -1, limitTime: age, policy: v.quotaPolicy }, "?backlogQuotaType=message_age", "message_age");
  const pm = int(v, "publishMsg", "Publish rate (messages)", -1), pb = int(v, "publishBytes", "Publish rate (bytes)", -1);
  put("publish rate", "publishRate", "publish_rate", p.publish_rate, pm === null && pb === null ? null
    : { publishThrottlingRateInMsg: pm ?? -1, publishThrottlingRateInByte: pb ?? -1 });
  const dm = int(v, "dispatchMsg", "Dispatch rate (messages)", -1), db = int(v, "dispatchBytes", "Dispatch rate (bytes)", -1);
  const period = int(v, "dispatchPeriod", "Dispatch rate period", 1) ?? 1;
  const currentDispatch = p.dispatch_rate ? { dispatchThrottlingRateInMsg: p.dispatch_rate.dispatchThrottlingRateInMsg,
    dispatchThrottlingRateInByte: p.dispatch_rate.dispatchThrottlingRateInByte, ratePeriodInSecond: p.dispatch_rate.ratePeriodInSecond } : null;
  put("dispatch rate", "dispatchRate", "dispatch_rate", currentDispatch, dm === null && db === null ? null
    : { dispatchThrottlingRateInMsg: dm ?? -1, dispatchThrottlingRateInByte: db ?? -1, ratePeriodInSecond: period });
  put("storage profile", "storageProfile", "storage_profile", p.storage_profile || null, v.storageProfile || null);
  return out;
}

// Edit, confirm the list of changes, apply them; resolves true when all were applied.
export async function editPolicies(ns, p, done) {
  let planned = null, storage = null;
  try { storage = (await get("/admin/v2/brokers/configuration/runtime")).storage; } catch { /* not readable: no default named */ }
  const values = await confirmDialog({
    title: `Policies of ${ns}`,
    text: "Change the fields, then review the changes before they are applied.",
    fields: formFields(p, storage), confirm: "Review changes…",
    validate: (v) => {
      try { planned = changes(ns, p, v); } catch (e) { return e.message; }
      return planned.length ? null : "Nothing changed.";
    },
  });
  if (values === null) return false;
  const ok = await confirmDialog({
    title: `Apply ${planned.length} change(s) to ${ns}?`,
    text: h("ul", { id: "policy-changes" }, planned.map((c) => h("li", {}, c.what))),
    confirm: "Apply", danger: false,
  });
  if (ok === null) return false;
  const applied = [];
  for (const c of planned) {
    try {
      await call(c.method, c.path, c.body);
      applied.push(c.what.split(":")[0]);  // the field's name
    } catch (e) {
      toast(`Refused by the broker (${c.what.split(":")[0]}): ${e.reason || e.message}` + (applied.length ? `. Applied before it: ${applied.join(", ")}` : ""), "error");
      if (done) await done();
      return false;
    }
  }
  toast(`Policies of ${ns} saved: ${applied.join(", ")}`, "ok");
  if (done) await done();
  return true;
}
