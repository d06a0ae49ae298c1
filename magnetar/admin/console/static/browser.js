// The message browser of a topic: read from an offset, a message id or the first
// stored message, filtered by key, property, text in the value and publish-time range
// (the broker scans and filters: /console/api/messages, docs/console.md).
import { get } from "./api.js";
import { fmtNum, fmtTime, h, table } from "./ui.js";

// "2026-11-28 12:00", "2026-11-28T12:00:05Z" or ms since the epoch -> ms; NaN when unreadable.
export function parseTime(text) {
  const t = (text || "").trim();
  if (!t) return null;
  if (/^\d+$/.test(t)) return Number(t);
  const iso = t.includes("T") ? t : t.replace(" ", "T");
  return Date.parse(/[zZ]|[+-]\d\d:?\d\d$/.test(iso) ? iso : iso + "Z");
}

export function messageBrowser(topicPath) {
  const mode = h("select", { id: "browse-mode" }, h("option", { value: "offset" }, "from offset"),
    h("option", { value: "messageId" }, "from message id"), h("option", { value: "first" }, "from the first stored"));
  const at = h("input", { id: "browse-at", placeholder: "0", value: "0" });
  const count = h("input", { id: "browse-count", type: "number", value: "20", min: "1", max: "100" });
  const key = h("input", { id: "filter-key", placeholder: "key contains…" });
  const prop = h("input", { id: "filter-property", placeholder: "property name=value" });
  const text = h("input", { id: "filter-text", placeholder: "value contains…" });
  const timeHelp = "Publish time, UTC (2026-11-28 12:00 or 2026-11-28T12:00:05Z), or ms since the epoch";
  const from = h("input", { id: "filter-from", class: "time", placeholder: "from 2026-11-28 12:00 UTC", title: timeHelp });
  const to = h("input", { id: "filter-to", class: "time", placeholder: "to 2026-11-28 12:30 UTC", title: timeHelp });
  const out = h("div", { id: "browse-results" }, h("p", { class: "muted" }, "Read messages by offset or message id, or filter them; payloads are decoded by the topic's schema."));
  let next = null;

  function problem(textValue) {
    out.replaceChildren(h("p", { class: "notice error-text", id: "browse-error" }, textValue));
  }

  async function read(fromId) {
    const q = new URLSearchParams({ count: count.value || "20" });
    const n = Number(count.value);
    if (!Number.isInteger(n) || n < 1 || n > 100) return problem("Count must be a whole number from 1 to 100.");
    const low = parseTime(from.value), high = parseTime(to.value);
    if (Number.isNaN(low)) return problem(`“${from.value}” is not a time: write 2026-11-28 12:00 (UTC) or ms since the epoch.`);
    if (Number.isNaN(high)) return problem(`“${to.value}” is not a time: write 2026-11-28 12:30 (UTC) or ms since the epoch.`);
    if (low !== null && high !== null && low > high) return problem("The “from” time is after the “to” time.");
    if (prop.value.trim().startsWith("=")) return problem("A property filter needs a name: name or name=value.");
    if (fromId) q.set("messageId", fromId);
    else if (mode.value === "offset" && !(low !== null && at.value.trim() === "0")) {
      if (!/^\d+$/.test(at.value.trim() || "0")) return problem(`The offset must be a whole number, not “${at.value}”.`);
      q.set("offset", at.value.trim() || "0");
    } else if (mode.value === "messageId") {
      if (!/^\d+:\d+(:\d+)?$/.test(at.value.trim())) return problem(`A message id is ledger:entry (e.g. 12:0), not “${at.value}”.`);
      q.set("messageId", at.value.trim());
    }
    if (key.value.trim()) q.set("key", key.value.trim());
    if (prop.value.trim()) q.set("property", prop.value.trim());
    if (text.value.trim()) q.set("text", text.value.trim());
    if (low !== null) q.set("from", String(low));
    if (high !== null) q.set("to", String(high));
    try {
      const data = await get(`/console/api/messages/${topicPath}?` + q);
      next = data.next;
      out.replaceChildren(
        h("p", { class: "muted", id: "browse-summary" }, `${data.messages.length} message(s)`
          + (data.filtered ? ` matching, of ${fmtNum(data.scanned)} looked at` : "") + ` · schema ${data.schema || "none (bytes)"}`),
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
        ], data.messages, { rowId: (m) => m.messageId, class: "messages",
          empty: data.filtered ? "No message matches in this stretch: “Next” looks further." : "No stored message there." }),
        next ? h("button", { class: "small", id: "browse-next", onclick: () => read(next) }, "Next page ›") : "");
    } catch (e) {
      problem((e.kind === "forbidden" ? "Not permitted: " : "Cannot read messages: ") + e.reason);
    }
  }
  const form = h("form", { class: "toolbar", id: "browse-form" }, mode, at, h("label", { class: "inline" }, "count ", count),
    h("button", { class: "primary", type: "submit", id: "browse-read" }, "Read"));
  const filters = h("div", { class: "toolbar filters", id: "browse-filters" }, h("span", { class: "muted" }, "Filter:"), key, prop, text, from, to,
    h("button", { class: "secondary", type: "button", id: "filter-clear", onclick: () => { for (const i of [key, prop, text, from, to]) i.value = ""; read(null); } }, "Clear"));
  for (const i of [key, prop, text, from, to]) i.addEventListener("keydown", (e) => { if (e.key === "Enter") { e.preventDefault(); read(null); } });
  form.addEventListener("submit", (e) => { e.preventDefault(); read(null); });
  return h("div", {}, form, filters, out);
}
