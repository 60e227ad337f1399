// The one way the dashboard talks to its server.
//
// Every call checks response.ok; a refusal becomes an ApiError carrying the server's own
// message (OpenAI's error shape: {"error": {message, type, param, code}}), so pages show what
// the server said and what to do. A 401 "login_required" sends the browser to the login page.
// Writes always send JSON with Content-Type: application/json (the server refuses others).

export const NEXT_KEY = "panelist.next";

export class ApiError extends Error {
  constructor(status, message, { code = null, param = null, type = null, retryAfter = null } = {}) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.code = code;
    this.param = param;
    this.type = type;
    this.retryAfter = retryAfter;
  }

  /** A stale edit: someone saved the same object since this page read it. */
  get stale() {
    return this.status === 409 && this.code === "stale";
  }
}

export function isAbort(err) {
  return err && err.name === "AbortError";
}

const FALLBACK = {
  400: "The server refused the request as invalid.",
  401: "Log in to continue.",
  403: "The server refused this request.",
  404: "Not found.",
  405: "That action is not allowed here.",
  409: "That conflicts with what is saved now; reload and try again.",
  413: "That is too large for the server.",
  415: "The server wants JSON.",
  429: "Too many attempts; wait a moment and try again.",
};

/** Turn a non-ok response (already read as text) into an ApiError with the server's message. */
export function errorFrom(response, text) {
  let body = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    body = null;
  }
  const e = body && typeof body === "object" && body.error && typeof body.error === "object"
    ? body.error : {};
  const message = typeof e.message === "string" && e.message
    ? e.message
    : FALLBACK[response.status] || `The server answered ${response.status} ${response.statusText}.`;
  return new ApiError(response.status, message, {
    code: e.code ?? null, param: e.param ?? null, type: e.type ?? null,
    retryAfter: response.headers.get("Retry-After"),
  });
}

export function toLogin() {
  try {
    const here = location.hash && location.hash !== "#" ? location.hash : "";
    if (here) sessionStorage.setItem(NEXT_KEY, here);
  } catch {
    /* storage may be off; the login page then opens the overview */
  }
  location.assign("/login");
}

/** Plain fetch with the dashboard's rules; returns the Response when it is ok. */
export async function send(method, path, body, { signal, headers = {} } = {}) {
  const init = { method, headers: { Accept: "application/json", ...headers }, signal,
    credentials: "same-origin", cache: "no-store" };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (err) {
    if (isAbort(err)) throw err;
    throw new ApiError(0, "The dashboard server could not be reached. Is it still running? "
      + "Start it again and reload this page.", { code: "unreachable" });
  }
  if (!response.ok) {
    const err = errorFrom(response, await response.text().catch(() => ""));
    if (response.status === 401 && err.code === "login_required") toLogin();
    throw err;
  }
  return response;
}

async function json(method, path, body, options) {
  const response = await send(method, path, body, options);
  const text = await response.text();
  if (!text) return null;
  try {
    return JSON.parse(text);
  } catch {
    throw new ApiError(response.status, "The server sent something that is not JSON; reload "
      + "the page, and if it persists, check the server's output.");
  }
}

export const api = {
  get: (path, options) => json("GET", path, undefined, options),
  post: (path, body = {}, options) => json("POST", path, body, options),
  put: (path, body = {}, options) => json("PUT", path, body, options),
  del: (path, options) => json("DELETE", path, undefined, options),
};

/** Encode one path segment (an alias may hold '/' or ':'). */
export function seg(value) {
  return encodeURIComponent(String(value));
}

export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== null && v !== undefined && v !== "") q.set(k, String(v));
  }
  const text = q.toString();
  return text ? `?${text}` : "";
}
