// The alerts banner: roster changes nobody made by hand (a model retired or restored by
// health, a price that went from free to paid), shown above every page until dismissed.
//
// Which alerts are new is kept in this browser only: Dismiss stores the newest alert's ts and
// how many shown alerts carry that ts. ts is ISO-8601 UTC to the second (the strings sort as
// times do), so several alerts may share one; the file only grows, newest last, so of those
// sharing the stored ts, the oldest `n` were seen and any before them in the newest-first list
// are new. Alert text comes from the server as text nodes.

import { api, isAbort } from "./api.js";
import { h, replace } from "./dom.js";
import { button, modelHref, modelLink, timeAgo } from "./ui.js";
import { alertHref } from "./signals.js";

const SEEN_KEY = "panelist.alertsSeen";
const LIMIT = 20;

function seen() {
  try {
    const v = JSON.parse(localStorage.getItem(SEEN_KEY) || "null");
    if (v && typeof v.ts === "string" && Number.isInteger(v.n)) return v;
  } catch { /* storage off or a foreign value: everything is new */ }
  return { ts: "", n: 0 };
}

function markSeen(shown) {
  const ts = shown[0].ts;   // newest first
  const n = shown.filter((a) => a.ts === ts).length + (ts === seen().ts ? seen().n : 0);
  try { localStorage.setItem(SEEN_KEY, JSON.stringify({ ts, n })); } catch { /* the banner comes back */ }
}

function unseen(alerts) {
  const last = seen();
  const dated = alerts.filter((a) => typeof a.ts === "string");
  const tied = dated.filter((a) => a.ts === last.ts).length;
  const freshTied = Math.max(0, tied - last.n);
  let tiedTaken = 0;
  return dated.filter((a) => {
    if (a.ts > last.ts) return true;
    if (a.ts === last.ts && tiedTaken < freshTied) { tiedTaken += 1; return true; }
    return false;
  });
}

// the kinds whose subject is a model on the roster: its name links to the model's page
const MODEL_KINDS = new Set(["retired", "restored", "went_paid", "onboarded"]);

function aboutModel(a) {
  return MODEL_KINDS.has(a.kind) || a.kind === "failing" || a.kind === "recovered" || typeof a.alias === "string";
}

function subject(a) {
  const name = String(a.subject ?? "");
  // an endpoint failing as a whole: its name opens its page
  if (typeof a.endpoint === "string") return h("a", { href: `#/endpoints/${encodeURIComponent(a.endpoint)}` }, h("strong", { text: a.endpoint }));
  return aboutModel(a) ? modelLink(a.alias || name) : h("strong", { text: name });
}

/** An alert's message as a link to what explains it: a failing model's failed seats, else
 *  the model's page (unless `onItsPage`); plain text when it is about no model. `text` stands
 *  in for the message's words when the subject already said its start. */
export function alertMessage(a, { onItsPage = false, text = String(a.message ?? "") } = {}) {
  const name = String(a.alias || a.subject || "");
  const href = typeof a.endpoint === "string" ? `#/endpoints/${encodeURIComponent(a.endpoint)}`
    : alertHref(a) || (aboutModel(a) && name && !onItsPage ? modelHref(name) : null);
  return href ? h("a", { href, class: "alert-link", "data-testid": "alert-link" }, text) : text;
}

// a message that begins with its subject's name ("sim-321 is failing: …") names it once
function subjectAndMessage(a) {
  const name = typeof a.endpoint === "string" ? a.endpoint
    : aboutModel(a) ? String(a.alias || a.subject || "") : String(a.subject ?? "");
  const message = String(a.message ?? "");
  if (name && message.startsWith(`${name} `)) {
    return [subject(a), " ", alertMessage(a, { text: message.slice(name.length + 1) })];
  }
  return [subject(a), ": ", alertMessage(a)];
}

/** Read the recent alerts and show the unseen ones in `slot` (hidden when there are none). */
export async function showAlerts(slot, signal) {
  let alerts;
  try {
    alerts = (await api.get(`/api/alerts?limit=${LIMIT}`, { signal })).data || [];
  } catch (err) {
    if (!isAbort(err)) slot.hidden = true;   // the page itself reports an unreachable server
    return;
  }
  const fresh = unseen(alerts);
  if (!fresh.length) {
    replace(slot);
    slot.hidden = true;
    return;
  }
  const dismiss = button("Dismiss", () => {
    markSeen(fresh);
    replace(slot);
    slot.hidden = true;
  }, { small: true, "aria-label": "Dismiss these alerts" });
  replace(slot, h("div", { class: ["notice", "warn"] },
    h("div", { class: "grow" },
      h("p", { class: "notice-title",
        text: fresh.length === 1 ? "1 new alert" : `${fresh.length} new alerts` }),
      h("ul", { class: "alert-list" }, fresh.map((a) => h("li", { "data-kind": a.kind },
        h("span", { class: "muted" }, timeAgo(a.ts), ` · ${a.kind} · `),
        ...subjectAndMessage(a))))),
    h("div", { class: "row" }, dismiss)));
  slot.hidden = false;
}
