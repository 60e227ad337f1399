// One verdict state per call id, for every view of the dashboard: the quick buttons, the marks,
// the Panels page's seat chips, the seat dialog's form and the owed queue all read and write it here, so a verdict saved in one
// place shows the same everywhere at once (the badge and the pressed button never disagree).
//
// Invariants: the state of a call is `undefined` (not known here), `null` (no verdict) or the
// server's verdict object ({useful, note, real, false, by, ts}); it changes only through
// `learn` (what the server said: a read, or a saved verdict) and every watcher of the call hears
// each change. A watcher belongs to an element and is dropped once that element has left the page.

import { api } from "./api.js";

const states = new Map();    // call -> verdict | null
const watchers = new Map();  // call -> Set of {el, fn, seen}

export function current(call) {
  return states.get(call);
}

/** What the server says a call's verdict is now (null: none); every watcher of it is told. */
export function learn(call, verdict) {
  const value = verdict && typeof verdict === "object" ? verdict
    : typeof verdict === "boolean" ? { useful: verdict } : null;
  states.set(call, value);
  const set = watchers.get(call);
  if (!set) return;
  for (const w of [...set]) {
    if (w.el.isConnected) {
      w.seen = true;
      w.fn(value);
    } else if (w.seen) {
      set.delete(w);   // shown once, gone now: its view was replaced
    }
  }
  if (!set.size) watchers.delete(call);
}

/** Call fn(verdict) now (when the state is known) and on every change, while el is shown. */
export function watch(call, el, fn) {
  let set = watchers.get(call);
  if (!set) { set = new Set(); watchers.set(call, set); }
  for (const w of [...set]) if (w.seen && !w.el.isConnected) set.delete(w);
  set.add({ el, fn, seen: el.isConnected });
  if (states.has(call)) fn(states.get(call));
}

/**
 * Record a verdict on the server and learn what it kept. A quick verdict keeps the note and
 * claims already written for the call (a later verdict replaces every field of an earlier one,
 * so sending none would wipe them); pass `details` to set them.
 */
export async function judge(call, useful, details = null, signal) {
  const prior = current(call);
  const kept = details || (prior ? { note: prior.note || "", real: prior.real || [], false: prior.false || [] }
    : { note: "", real: [], false: [] });
  const result = await api.post("/api/verdict", { call, useful, note: kept.note || "", real: kept.real || [],
    false: kept.false || [] }, { signal });
  learn(call, result.verdict || null);
  return result;
}
