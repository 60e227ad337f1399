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
import { button, modelLink, timeAgo } from "./ui.js";

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

function subject(a) {
  const name = String(a.subject ?? "");
  return MODEL_KINDS.has(a.kind) || typeof a.alias === "string" ? modelLink(a.alias || name)
    : h("strong", { text: name });
}

// a message that begins with its subject's name ("sim-321 is failing: …") names it once
function subjectAndMessage(a) {
  const name = MODEL_KINDS.has(a.kind) || typeof a.alias === "string"
    ? String(a.alias || a.subject || "") : String(a.subject ?? "");
  const message = String(a.message ?? "");
  if (name && message.startsWith(`${name} `)) return [subject(a), message.slice(name.length)];
  return [subject(a), ": ", message];
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
