// Small DOM helpers, number formats, the confirmation dialog and the toast.

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else if (k === "html") el.innerHTML = v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

export function fmtRate(v) {
  if (v === undefined || v === null) return "–";
  if (v >= 1e6) return (v / 1e6).toFixed(2) + " M/s";
  if (v >= 1e3) return (v / 1e3).toFixed(1) + " k/s";
  return (v >= 10 ? v.toFixed(0) : v.toFixed(1)) + " /s";
}

export function fmtBytes(v) {
  if (v === undefined || v === null) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return (i === 0 ? v.toFixed(0) : v.toFixed(1)) + " " + units[i];
}

export function fmtNum(v) {
  if (v === undefined || v === null) return "–";
  return Number(v).toLocaleString("en-US");
}

export function fmtTime(ms) {
  if (!ms) return "–";
  return new Date(ms).toISOString().replace("T", " ").replace("Z", " UTC");
}

export function card(label, value, extra) {
  return h("div", { class: "card" }, h("div", { class: "card-label" }, label),
    h("div", { class: "card-value" }, value), extra ? h("div", { class: "card-extra" }, extra) : null);
}

export function table(columns, rows, opts = {}) {
  // columns: [{key, label, render?, num?, sortable?}]
  const head = h("tr", {}, columns.map((c) => {
    const th = h("th", { class: c.num ? "num" : "", "data-key": c.key }, c.label);
    if (opts.sort && c.sortable !== false) {
      th.classList.add("sortable");
      if (opts.sort.key === c.key) th.classList.add(opts.sort.order === "asc" ? "asc" : "desc");
      th.addEventListener("click", () => opts.onSort(c.key));
    }
    return th;
  }));
  const body = rows.length ? rows.map((r) => h("tr", { "data-row": opts.rowId ? opts.rowId(r) : null },
    columns.map((c) => h("td", { class: c.num ? "num" : "" }, c.render ? c.render(r) : (r[c.key] ?? "–")))))
    : [h("tr", {}, h("td", { colspan: columns.length, class: "empty" }, opts.empty || "Nothing here yet."))];
  return h("table", { class: "grid" + (opts.class ? " " + opts.class : "") }, h("thead", {}, head), h("tbody", {}, body));
}

export function section(title, ...children) {
  return h("section", { class: "panel" }, h("h2", {}, title), ...children);
}

// A dialog that states what will be done; resolves with the form's values, or null when cancelled.
// ``validate(values)`` may return a sentence saying what is wrong: it is shown and the dialog stays open.
export function confirmDialog({ title, text, fields = [], confirm = "Confirm", danger = false, validate }) {
  const modal = document.getElementById("modal");
  return new Promise((resolve) => {
    const inputs = {};
    const form = h("form", { class: "dialog", id: "confirm-dialog" },
      h("h3", {}, title),
      text ? h("p", {}, text) : null,
      fields.map((f) => {
        let input;
        if (f.options) {
          input = h("select", { name: f.name, id: "field-" + f.name },
            f.options.map((o) => h("option", { value: o.value ?? o, selected: (o.value ?? o) === f.value }, o.label ?? o)));
        } else if (f.checkboxes) {
          input = h("div", { class: "checks", id: "field-" + f.name }, f.checkboxes.map((o) =>
            h("label", {}, h("input", { type: "checkbox", name: f.name, value: o, checked: (f.value || []).includes(o) }), " " + o)));
        } else if (f.type === "textarea") {
          input = h("textarea", { name: f.name, id: "field-" + f.name, placeholder: f.placeholder || "", rows: f.rows || 4 }, f.value ?? "");
        } else {
          input = h("input", { name: f.name, id: "field-" + f.name, value: f.value ?? "", placeholder: f.placeholder || "",
            type: f.type || "text", required: f.required });
        }
        inputs[f.name] = input;
        return h("label", { class: "field" }, h("span", {}, f.label), input, f.help ? h("small", {}, f.help) : null);
      }),
      h("div", { class: "error", id: "dialog-error", hidden: true }),
      h("div", { class: "actions" },
        h("button", { type: "button", class: "secondary", id: "dialog-cancel", onclick: () => close(null) }, "Cancel"),
        h("button", { type: "submit", class: danger ? "danger" : "primary", id: "dialog-confirm" }, confirm)));
    function close(value) { modal.hidden = true; modal.replaceChildren(); resolve(value); }
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      const values = {};
      for (const [name, input] of Object.entries(inputs)) {
        values[name] = input.classList.contains("checks")
          ? [...input.querySelectorAll("input:checked")].map((i) => i.value)
          : input.tagName === "TEXTAREA" ? input.value : input.value.trim();
      }
      const problem = validate ? validate(values) : null;
      if (problem) {
        const box = form.querySelector("#dialog-error");
        box.textContent = problem;
        box.hidden = false;
        return;
      }
      close(values);
    });
    modal.replaceChildren(form);
    modal.hidden = false;
    const first = form.querySelector("input,select");
    if (first) first.focus();
  });
}

let toastTimer;
export function toast(text, kind = "ok") {
  const el = document.getElementById("toast");
  el.textContent = text;
  el.className = "toast " + kind;
  el.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { el.hidden = true; }, kind === "ok" ? 4000 : 10000);
}

export function stateBadge(state) {
  return h("span", { class: "badge state-" + String(state || "none").toLowerCase() }, state || "unowned");
}

export function topicHref(name) {
  return "#/topic/" + name.replace("://", "/");
}

// "12:34:56" in the browser's time zone (the chart's axis and legend).
export function clock(seconds) {
  const d = new Date(seconds * 1000);
  return [d.getHours(), d.getMinutes(), d.getSeconds()].map((x) => String(x).padStart(2, "0")).join(":");
}

// "k1=v1, k2=v2" or one per line -> {k1: "v1", ...}; throws an Error saying which part is wrong.
export function parseProperties(text) {
  const out = {};
  for (const part of (text || "").split(/[\n,]/).map((x) => x.trim()).filter(Boolean)) {
    const at = part.indexOf("=");
    if (at <= 0) throw new Error(`property “${part}” is not name=value`);
    out[part.slice(0, at).trim()] = part.slice(at + 1).trim();
  }
  return out;
}

export function shortTopic(name) {
  return name.replace(/^persistent:\/\//, "");
}
