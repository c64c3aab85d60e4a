// The page's calls to the server. Errors carry the server's own message (FastAPI's "detail"),
// so what the user sees is why, not "HTTP 422" - asked for in the page's language, which the
// user may have switched away from the browser's. Cookies (the session, the token) go along by
// themselves: the page never handles a secret.

import { chosenLang } from "./i18n.js";

const language = () => (chosenLang() ? { "Accept-Language": chosenLang() } : {});

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

function detail(body, status) {
  if (!body) return `HTTP ${status}`;
  if (typeof body.detail === "string") return body.detail;
  if (typeof body.error === "string") return body.error; // a form that did not validate (422)
  const d = body.detail ?? body.message;
  if (typeof d === "string") return d;
  if (Array.isArray(d)) return d.map((x) => `${(x.loc || []).slice(1).join(".")}: ${x.msg}`).join("; ");
  return JSON.stringify(d ?? body);
}

export async function api(path, { method = "GET", body } = {}) {
  const init = { method, headers: language() };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const r = await fetch(path, init);
  const type = r.headers.get("content-type") || "";
  const data = type.includes("json") ? await r.json().catch(() => null) : await r.text();
  if (!r.ok) throw new ApiError(r.status, detail(typeof data === "string" ? { detail: data } : data, r.status));
  return data;
}

export const runPath = (id, rest = "") => `/api/runs/${encodeURIComponent(id)}${rest}`;

// A file's bytes as text, whatever type the server gives it (a .json file stays as written).
export async function apiText(path) {
  const r = await fetch(path, { headers: language() });
  const text = await r.text();
  if (!r.ok) {
    let message = text;
    try { message = detail(JSON.parse(text), r.status); } catch { /* plain text */ }
    throw new ApiError(r.status, message || `HTTP ${r.status}`);
  }
  return text;
}
