// The admin API as the console calls it: credentials, errors as ApiError.
const KEY = "magnetar.console.credential";

export class ApiError extends Error {
  constructor(status, reason, kind) {
    super(reason);
    this.status = status;   // 0: the broker did not answer
    this.reason = reason;
    this.kind = kind;       // "down" | "auth" | "forbidden" | "refused"
  }
}

export function credential() {
  try { return JSON.parse(sessionStorage.getItem(KEY) || "null"); } catch { return null; }
}

export function setCredential(value) {
  if (value) sessionStorage.setItem(KEY, JSON.stringify(value));
  else sessionStorage.removeItem(KEY);
}

function authHeader() {
  const c = credential();
  if (!c) return {};
  if (c.token) return { Authorization: "Bearer " + c.token };
  if (c.user) return { Authorization: "Basic " + btoa(unescape(encodeURIComponent(c.user + ":" + c.password))) };
  return {};
}

export async function call(method, path, body) {
  const headers = { ...authHeader() };
  let payload;
  if (body !== undefined) { headers["Content-Type"] = "application/json"; payload = JSON.stringify(body); }
  let res;
  try {
    res = await fetch(path, { method, headers, body: payload, cache: "no-store" });
  } catch (e) {
    throw new ApiError(0, "the broker at " + location.host + " does not answer (" + e.message + ")", "down");
  }
  const text = await res.text();
  let data = null;
  if (text) { try { data = JSON.parse(text); } catch { data = text; } }
  if (res.ok) return data;
  const reason = (data && data.reason) || res.statusText || ("HTTP " + res.status);
  const kind = res.status === 401 ? "auth" : res.status === 403 ? "forbidden"
    : (res.status === 502 || res.status === 503 || res.status === 504) && !data?.reason ? "down" : "refused";
  throw new ApiError(res.status, reason, kind);
}

export const get = (path) => call("GET", path);
