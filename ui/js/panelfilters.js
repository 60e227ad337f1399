// The Panels page's filters: text (prompts and answers), model, collection, key, status and time
// range. They live in the page's address (#/panels?q=…&model=…), so a view can be reloaded and
// shared, and travel as the same names to GET /api/panels. A refusal of one filter is shown next
// to its field. The excerpt of where a text was found is drawn from text nodes, the match marked.

import { h, newId } from "./dom.js";
import * as fmt from "./format.js";
import { field, input, linkButton, select } from "./ui.js";

export const FILTERS = ["q", "model", "collection", "key", "status", "since", "until"];

const STATUSES = [["", "Any status"], ["failed", "A seat failed"], ["owed", "Verdicts owed"], ["abandoned", "Caller left"]];
const SPANS = [["", "Any time"], ["1h", "Last hour"], ["24h", "Last 24 hours"], ["7d", "Last 7 days"], ["30d", "Last 30 days"], ["custom", "Custom range…"]];

/** The filters an address asks for: {q, model, …}, each a string ("" when absent). */
export function filtersFrom(params) {
  return Object.fromEntries(FILTERS.map((name) => [name, (params.get(name) || "").trim()]));
}

export function filtering(filters) {
  return FILTERS.some((name) => filters[name]);
}

/** The filters that are set, for a query string. */
export function filterQuery(filters) {
  return Object.fromEntries(FILTERS.filter((name) => filters[name]).map((name) => [name, filters[name]]));
}

/** The address of the Panels page with these filters. */
export function hashFor(filters) {
  const q = new URLSearchParams(filterQuery(filters)).toString();
  return q ? `#/panels?${q}` : "#/panels";
}

/** In words, what a filtered list holds. */
export function describe(filters) {
  const parts = [];
  if (filters.q) parts.push(`text “${filters.q}”`);
  if (filters.model) parts.push(`model ${filters.model}`);
  if (filters.collection) parts.push(`collection ${filters.collection}`);
  if (filters.key) parts.push(`key ${filters.key}`);
  if (filters.status) parts.push((STATUSES.find(([v]) => v === filters.status) || [, filters.status])[1].toLowerCase());
  const span = SPANS.find(([v]) => v && v === filters.since && !filters.until);
  if (span) parts.push(span[1].toLowerCase());
  else {
    if (filters.since) parts.push(`from ${filters.since}`);
    if (filters.until) parts.push(`to ${filters.until}`);
  }
  return parts.join(" · ");
}

function datalist(id, values) {
  return h("datalist", { id }, values.map((v) => h("option", { value: v })));
}

/**
 * The filter form. `choices`: {models, collections, keys} (names to suggest); `error`: a
 * refusal from the server ({param, message}) shown next to its field; `onApply(filters)`.
 */
export function filterBar(current, { choices = {}, error = null, onApply }) {
  const listModels = newId("models");
  const listKeys = newId("keys");
  const q = input({ type: "search", name: "q", value: current.q, maxlength: 500,
    placeholder: "words, \"a phrase\" or pars*" });
  const model = input({ name: "model", value: current.model, list: listModels, placeholder: "any model" });
  const collection = select([["", "Any collection"], ...(choices.collections || []).map((c) => [c, c])],
    current.collection, { name: "collection" });
  if (current.collection && ![...collection.options].some((o) => o.value === current.collection)) {
    collection.append(h("option", { value: current.collection, selected: true }, current.collection));
  }
  const key = input({ name: "key", value: current.key, list: listKeys, placeholder: "any key" });
  const status = select(STATUSES, current.status, { name: "status" });
  const preset = SPANS.some(([v]) => v && v !== "custom" && v === current.since) && !current.until;
  const span = select(SPANS, preset ? current.since : current.since || current.until ? "custom" : "", { name: "span" });
  const since = input({ name: "since", value: preset ? "" : current.since, placeholder: "2026-01-31 or 24h" });
  const until = input({ name: "until", value: current.until, placeholder: "2026-01-31" });
  const custom = h("div", { class: "filter-custom", hidden: span.value !== "custom" },
    field("From (UTC)", since, { hint: "A day, a time, or a span back such as 7d" }),
    field("To (UTC)", until, { hint: "A day alone includes all of it" }));
  span.addEventListener("change", () => { custom.hidden = span.value !== "custom"; });

  const fields = {
    q: field("Search prompts and answers", q, { wide: true, hint: "Every word must appear; quote a phrase; end a word with * for a prefix." }),
    model: field("Model", model),
    collection: field("Collection", collection),
    key: field("Key", key),
    status: field("Status", status),
    span: field("Time", span),
  };
  const controls = { q, model, collection, key, status, since, until };
  if (error && error.param && controls[error.param]) {
    const control = controls[error.param];
    control.setAttribute("aria-invalid", "true");
    const msg = h("span", { class: "field-error", id: newId("err"), role: "alert", text: error.message });
    control.setAttribute("aria-describedby", `${control.getAttribute("aria-describedby") || ""} ${msg.id}`.trim());
    control.closest(".field").append(msg);
    if (control === since || control === until) custom.hidden = false;
  }
  const form = h("form", { class: "filters card", role: "search", "aria-label": "Filter panels" },
    fields.q,
    h("div", { class: "filter-row" }, fields.model, fields.collection, fields.key, fields.status, fields.span),
    custom,
    h("div", { class: "form-actions" },
      filtering(current) ? linkButton("Clear filters", "#/panels") : null,
      h("button", { type: "submit", class: "btn primary" }, "Search")),
    datalist(listModels, choices.models || []),
    datalist(listKeys, choices.keys || []));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const chosen = span.value;
    onApply({
      q: q.value.trim(), model: model.value.trim(), collection: collection.value, key: key.value.trim(),
      status: status.value,
      since: chosen === "custom" ? since.value.trim() : chosen,
      until: chosen === "custom" ? until.value.trim() : "",
    });
  });
  return form;
}

/** Where the text was found: the words around it, the match marked. */
export function matchLine(match) {
  if (!match || typeof match.text !== "string") return null;
  const [start, end] = Array.isArray(match.at) ? match.at : [0, 0];
  const where = match.in === "answer" ? `in the answer of ${String(match.call || "").split(".").pop()}` : "in the prompt";
  return h("p", { class: "match small", "data-testid": "match" },
    h("span", { class: "muted", text: `Found ${where}: ` }),
    match.text.slice(0, start), h("mark", { text: match.text.slice(start, end) }), match.text.slice(end));
}

/** How far behind the search index is, in words ("1,204 panels behind"). */
export function indexBehind(index) {
  const n = index && index.behind_panels;
  return Number.isInteger(n) ? `${fmt.plural(n, "panel")} behind` : "behind";
}

/** What the search index said, when it did not cover the logs whole. */
export function indexNote(index) {
  if (!index || index.complete) return null;
  return h("p", { class: "notice", role: "status", "data-testid": "index-note" },
    `The search index is catching up: ${indexBehind(index)}, ${fmt.count(index.indexed)} panels read so far`
    + `${index.building ? ", newest first" : ""}. Results may be missing panels it has not read yet. This list fills in by itself.`);
}
