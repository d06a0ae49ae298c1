// The console's shell: session, login, navigation, polling, the status banner.
import { ApiError, get, setCredential, credential } from "./api.js";
import { h } from "./ui.js";
import * as overview from "./pages/overview.js";
import * as tenants from "./pages/tenants.js";
import * as topics from "./pages/topics.js";
import * as topic from "./pages/topic.js";
import * as regions from "./pages/regions.js";
import * as lag from "./pages/lag.js";
import * as login from "./pages/login.js";

const PAGES = { overview, tenants, topics, topic, lag, regions };
// Every 2 s; ?poll=MS in the page's address changes it (the tests poll faster).
const POLL_MS = Math.max(200, Number(new URLSearchParams(location.search).get("poll")) || 2000);
const view = document.getElementById("view");
const banner = document.getElementById("banner");
let current = null;   // {refresh, stop}
let timer = null;
let generation = 0;
export const session = { info: null };

function setConnection(ok, text) {
  document.getElementById("conn").className = "dot " + (ok ? "ok" : "bad");
  document.getElementById("conn-text").textContent = text;
}

export function showProblem(error) {
  // A clear sentence for every failure; the page keeps what it showed.
  let text;
  if (!(error instanceof ApiError)) text = "The console hit an error: " + (error && error.message);
  else if (error.kind === "down") text = "Broker unreachable: " + error.reason + ". Retrying every few seconds; the figures below may be stale.";
  else if (error.kind === "auth") text = "Your login is missing, wrong or expired (" + error.reason + "). Log in again.";
  else if (error.kind === "forbidden") text = "Not permitted: " + error.reason;
  else text = "The broker refused: " + error.reason;
  banner.textContent = "";
  banner.append(h("strong", {}, error instanceof ApiError && error.kind === "down" ? "Disconnected. " : ""), text);
  if (error instanceof ApiError && error.kind === "auth") {
    banner.append(" ", h("button", { class: "link", id: "relogin", onclick: () => { setCredential(null); route(); } }, "Log in"));
  }
  banner.className = "banner " + (error && error.kind === "down" ? "down" : "warn");
  banner.hidden = false;
  if (error instanceof ApiError && error.kind === "down") setConnection(false, "broker unreachable");
  if (error instanceof ApiError && error.kind === "auth") setConnection(false, "login needed");
}

function clearProblem() {
  banner.hidden = true;
}

function parseHash() {
  const raw = location.hash.replace(/^#\/?/, "") || "overview";
  const [path, query = ""] = raw.split("?");
  const parts = path.split("/");
  return { page: parts[0], rest: parts.slice(1).map(decodeURIComponent), params: new URLSearchParams(query) };
}

function pageProblem(error) {
  // A page that never loaded says why in its own body too, not only in the banner.
  let box = document.getElementById("page-problem");
  if (!box) {
    box = h("div", { class: "panel empty-state", id: "page-problem" });
    view.prepend(box);
  }
  const title = error.kind === "forbidden" ? "Not permitted" : error.kind === "auth" ? "Login needed"
    : error.kind === "down" ? "Cannot reach the broker" : "The broker refused";
  box.replaceChildren(h("h2", {}, title), h("p", {}, error.reason || String(error.message || error)));
}

async function tick(gen) {
  if (gen !== generation || !current || !current.refresh) return;
  try {
    await current.refresh();
    if (gen !== generation) return;
    current.loaded = true;
    document.getElementById("page-problem")?.remove();
    clearProblem();
    setConnection(true, "live · " + (session.info ? session.info.broker : location.host));
  } catch (e) {
    if (gen !== generation) return;
    showProblem(e);
    if (!current.loaded) pageProblem(e);
  }
  // A page may ask to be polled less often (the tenants page makes a call per namespace).
  if (gen === generation) timer = setTimeout(() => tick(gen), Math.max(POLL_MS, current.pollMs || 0));
}

export async function route() {
  generation++;
  clearTimeout(timer);
  if (current && current.stop) current.stop();
  current = null;
  const gen = generation;
  try {
    session.info = await get("/console/api/session");
  } catch (e) {
    if (e instanceof ApiError && e.kind === "auth") {
      showLogin(e.reason);
      return;
    }
    showProblem(e);
    view.replaceChildren(h("div", { class: "panel empty-state", id: "unreachable" },
      h("h2", {}, "Cannot reach the broker"), h("p", {}, e.reason || String(e)),
      h("p", { class: "muted" }, "The console retries on its own.")));
    timer = setTimeout(() => { if (gen === generation) route(); }, POLL_MS);
    return;
  }
  const who = document.getElementById("who");
  who.textContent = session.info.role ? "role: " + session.info.role : (session.info.authentication ? "" : "no authentication");
  document.getElementById("logout").hidden = !credential();
  const { page, rest, params } = parseHash();
  const module = PAGES[page] || overview;
  for (const a of document.querySelectorAll("#nav a")) {
    a.classList.toggle("active", a.dataset.page === page || (page === "topic" && a.dataset.page === "topics"));
  }
  current = module.render({ rest, params, session: session.info, navigate: (hash) => { location.hash = hash; } });
  view.replaceChildren(current.el);
  document.title = "Magnetar · " + (current.title || page);
  tick(gen);
}

function showLogin(reason) {
  document.getElementById("who").textContent = "";
  setConnection(false, "login needed");
  const had = credential();
  clearProblem();
  view.replaceChildren(login.render({
    reason: had ? "Login refused: " + reason : "This broker wants a login.",
    onLogin: (cred) => { setCredential(cred); route(); },
  }));
}

document.getElementById("logout").addEventListener("click", () => { setCredential(null); route(); });
window.addEventListener("hashchange", route);
window.addEventListener("unhandledrejection", (e) => showProblem(e.reason));
route();
