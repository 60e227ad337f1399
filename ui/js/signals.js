// Where a signal leads: the address of the view that explains an alert, a health tile or a
// row of Recent activity. A model failing leads to its failed seats on Panels from shortly
// before the alert on; verdicts owed lead to the owed queue; a window's error rate to the
// panels that failed in that window. Only addresses are made here (the pages read them back
// with panelfilters.js), so every link can be reloaded and shared.

import { hashFor } from "./panelfilters.js";

// how far before a `failing` alert its failed seats are looked for: the rule counts a model's
// last few calls, which a busy model makes in seconds and a quiet one over an hour or so
export const LEAD_MS = 60 * 60 * 1000;

// a window of Recent activity as the span the Panels filter offers for it
export const WINDOW_SPAN = { hour: "1h", day: "24h", week: "7d" };

/** An ISO time to the second, as the panels filter takes it ("2026-01-31T12:00:00Z"). */
export function isoSecond(ms) {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");
}

/** The failed seats of one model (or of every model) since `since` (a span or a time). */
export function failedSeats(model, since = "") {
  return hashFor({ model: model || "", status: "failed", since });
}

/** The panels of one model since `since`. */
export function modelPanels(model, since = "") {
  return hashFor({ model, since });
}

/** The verdicts owed: the queue, not the unfiltered Panels. */
export const OWED = "#/owed";

/** The view that explains one alert, or null when its subject's page is the explanation. */
export function alertHref(a) {
  const alias = typeof a.alias === "string" && a.alias ? a.alias : String(a.subject ?? "");
  if (a.kind !== "failing" || !alias || a.probe === true) return null;
  const at = Date.parse(a.ts);
  return failedSeats(alias, Number.isFinite(at) ? isoSecond(at - LEAD_MS) : "");
}
