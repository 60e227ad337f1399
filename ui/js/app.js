// The dashboard shell: hash routes (#/overview, #/panels?q=…, #/models/ALIAS, #/endpoints/NAME,
// #/keys/NAME, …), the header, the shared
// /api/info, and a clean hand-over between pages (the old page's requests are aborted and its
// timers stopped before the next page draws).

import { api, isAbort, toLogin } from "./api.js";
import { replace } from "./dom.js";
import { showAlerts } from "./alerts.js";
import { navMenu } from "./menu.js";
import { errorState, loading, emptyState, linkButton, toast } from "./ui.js";

// Each page's module is fetched the first time it is shown, so a visit loads and compiles only
// the code of the page it opens (the Ask page's Markdown renderer is most of the rest).
const PAGES = {
  overview: () => import("./pages/overview.js"),
  ask: () => import("./pages/ask.js"),
  owed: () => import("./pages/owed.js"),
  panels: () => import("./pages/panels.js"),
  evidence: () => import("./pages/evidence.js"),
  races: () => import("./pages/races.js"),
  discover: () => import("./pages/discover.js"),
  collections: () => import("./pages/collections.js"),
  endpoints: () => import("./pages/endpoints.js"),
  settings: () => import("./pages/settings.js"),
  models: () => import("./pages/model.js"),
  keys: () => import("./pages/key.js"),
};

const main = document.getElementById("main");
const nav = document.getElementById("nav");
const owedBadge = document.getElementById("owed-count");
const logout = document.getElementById("logout");
const alertsBanner = document.getElementById("alerts-banner");
const menu = navMenu(document.querySelector(".app-header"), document.getElementById("nav-toggle"), nav);

let current = null;
let infoPromise = null;
let firstRoute = true;

function decoded(part) {
  try { return decodeURIComponent(part); } catch { return part; }
}

// "#/models/sim%2Fa?x=1" → page "models", path ["sim/a"], params x=1
function parseHash() {
  const raw = location.hash.replace(/^#\/?/, "");
  const at = raw.indexOf("?");
  const [name, ...path] = (at < 0 ? raw : raw.slice(0, at)).split("/");
  return { name: name || "overview", path: path.map(decoded), params: new URLSearchParams(at < 0 ? "" : raw.slice(at + 1)) };
}

export function navigate(hash) {
  if (location.hash === hash) route();
  else location.hash = hash;
}

function showInfo(info) {
  const owed = info && info.counts ? info.counts.owed : 0;
  setOwed(owed);
  logout.hidden = !(info && info.auth && info.auth.token_required);
}

export function setOwed(owed) {
  if (owed > 0) {
    owedBadge.hidden = false;
    owedBadge.textContent = owed > 9999 ? `${Math.floor(owed / 1000)}k` : owed.toLocaleString();
    owedBadge.setAttribute("aria-label", `${owed} verdicts owed`);
    owedBadge.title = `${owed} answers wait for a verdict`;
  } else {
    owedBadge.hidden = true;
  }
}

function refreshInfo() {
  infoPromise = api.get("/api/info").then((info) => { showInfo(info); return info; });
  infoPromise.catch(() => { /* the page that needs it shows the error */ });
  return infoPromise;
}

async function route() {
  if (current) {
    current.controller.abort();
    for (const fn of current.cleanups.splice(0)) {
      try { fn(); } catch { /* a cleanup never blocks the next page */ }
    }
  }
  // a link followed from a dialog (a model's name in a seat's) leaves the dialog's page behind
  for (const dialog of document.querySelectorAll("dialog[open]")) dialog.close();
  menu.close();
  const { name, path, params } = parseHash();
  const load = PAGES[name];
  const controller = new AbortController();
  const state = { controller, cleanups: [] };
  current = state;
  for (const a of nav.querySelectorAll("a")) {
    if (a.dataset.page === name) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  refreshInfo();
  showAlerts(alertsBanner, controller.signal);
  if (!load) {
    document.title = "Not found · Panelist";
    replace(main, emptyState("No such page", `There is no page "${name}".`,
      linkButton("Go to the overview", "#/overview", "primary")));
    return;
  }
  replace(main, loading());
  let page;
  try {
    page = await load();
  } catch (err) {
    if (current === state) replace(main, errorState(err, () => route()));
    return;
  }
  if (current !== state) return;
  document.title = `${page.title} · Panelist`;
  const ctx = {
    signal: controller.signal,
    params,
    path,
    info: () => infoPromise,
    refreshInfo,
    navigate,
    setOwed,
    onCleanup: (fn) => state.cleanups.push(fn),
    get active() { return current === state && !controller.signal.aborted; },
  };
  try {
    await page.render(main, ctx);
  } catch (err) {
    if (isAbort(err) || current !== state) return;
    replace(main, errorState(err, () => route()));
  }
  // after a navigation, keyboard and screen-reader users start at the new content, unless the
  // page itself put the focus somewhere (a form it opened)
  const focusIsOutside = !main.contains(document.activeElement) || document.activeElement === main;
  if (!firstRoute && current === state && focusIsOutside) main.focus({ preventScroll: true });
  firstRoute = false;
}

logout.addEventListener("click", async () => {
  logout.disabled = true;
  try {
    await api.post("/api/logout", {});
    location.assign("/login");
  } catch (err) {
    toast(err.message, { kind: "error" });
    logout.disabled = false;
  }
});

window.addEventListener("hashchange", route);
// a promise nobody awaited must still reach the person, not only the console
window.addEventListener("unhandledrejection", (event) => {
  if (isAbort(event.reason)) { event.preventDefault(); return; }
  if (event.reason && event.reason.name === "ApiError") {
    event.preventDefault();
    toast(event.reason.message, { kind: "error" });
  }
});
if (!location.hash) history.replaceState(null, "", "#/overview");
// the page's code is fetched while the session is asked about, not after
const first = PAGES[parseHash().name];
if (first) first().catch(() => { /* route() shows the failure */ });
// a visit without a session goes to the login page before any call the server would refuse
// (each refusal would be an error in the console); a failed look leaves it to the first call
fetch("/api/session", { credentials: "same-origin", cache: "no-store", headers: { Accept: "application/json" } })
  .then((r) => (r.ok ? r.json() : null))
  .catch(() => null)
  .then((s) => { if (s && s.token_required && !s.logged_in) toLogin(); else route(); });

