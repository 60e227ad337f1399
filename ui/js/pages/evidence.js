// Evidence: per model and shape, how often answers were useful (with a 95% Wilson interval),
// false claims, seats over time, answer times and failures: charts first, the full table
// folded underneath. Below them, each model's rating per shape (GET /api/ratings: the same
// ratings panelist ratings prints and suggestions are made from), its record on the review
// suite, and Run the suite (suiterun.js) with the progress of the run there is; then how each
// judge scored against people (judgechecks.js, GET /api/judge/checks).

import { api, isAbort, query } from "../api.js";
import { h, replace } from "../dom.js";
import * as fmt from "../format.js";
import { failureChart, rateChart, timeChart } from "../charts.js";
import { seatsPerDay } from "../daychart.js";
import { dataTable } from "../table.js";
import { suiteRunPanel } from "../suiterun.js";
import { judgeChecksCard } from "../judgechecks.js";
import { emptyState, field, linkButton, loading, modelLink, notice, pageHead, rateCell, select } from "../ui.js";

export const title = "Evidence";
const CHART_ROWS = 25;

function chartCard(heading, note, body, legend = null) {
  return h("section", { class: "card chart-card" },
    h("div", null, h("h2", { text: heading }), note ? h("p", { class: "chart-note" }, note) : null),
    legend, body);
}

// the headline first: no constant answer scores above 50% on pairs or balanced claims
const SUITE_RATES = [
  ["pairs", "Pairs"], ["balanced", "Balanced claims"], ["accuracy", "Accuracy"],
  ["precision", "Precision"], ["recall", "Recall"], ["claims", "Claims"], ["unparseable", "Unparseable"],
];

// why a suite rate is a dash, in a few words: no task was answered (and how each failed: a
// failure kept as a sample, or one still to be made good), no bug was asked with its control,
// or the claims asked were all of one kind
function noRateWhy(r, name) {
  const kinds = {};
  for (const part of [r.failures, r.unfinished]) {
    for (const [k, n] of Object.entries(part || {})) kinds[k] = (kinds[k] || 0) + n;
  }
  const failed = Object.values(r.failures || {}).reduce((a, n) => a + n, 0);
  if (Object.keys(kinds).length && failed >= (r.samples || 0)) {
    return `no answer: ${Object.entries(kinds).map(([k, n]) => `${fmt.count(n)} ${k.replace(/_/g, " ")}`).join(", ")}`;
  }
  const rec = r[name] || {};
  if (["pairs", "precision", "recall"].includes(name)) return rec.n ? "too few answers" : "no bug asked with its control";
  if (name === "balanced") return rec.n ? "needs true and false claims" : "no claim asked";
  return "not asked";
}

// each model's suite record: rates over its latest samples, each with its 95% interval
function suiteCard(rows, warnings, runPanel) {
  const about = "Scored on review tasks with a strict answer form. "
    + "Pairs: a seeded bug found and its untouched control judged clean. Balanced claims: the mean of the "
    + "right verdicts on true and on false claims. Neither can be gamed by always giving one answer; "
    + "accuracy can (always NO FAULT scores 50%). Unparseable: answers not in the form asked (lower is better).";
  if (!rows.length) {
    return h("section", { class: "card", "data-testid": "suite-card" },
      h("h2", { text: "Review suite" }),
      h("p", { class: "chart-note" }, `No model has been scored yet. ${about}`), runPanel);
  }
  // balanced claims has samples but no rate until claims of both keys were asked
  const counted = (r, name) => Boolean(r[name] && r[name].n && r[name].rate !== null);
  const rateOf = (name) => (r) => (counted(r, name)
    ? rateCell(r[name].rate, r[name].interval, r[name].hits, r[name].n - r[name].hits)
    : h("span", { class: "faint", "data-why": "" }, "– ", h("span", { class: "small", text: noRateWhy(r, name) })));
  const table = dataTable({
    label: "Review suite per model",
    rows,
    short: true,
    sort: { key: "pairs", dir: "desc" },
    filterHint: "Filter by model",
    columns: [
      { key: "model", label: "Model", cell: (r) => modelLink(r.model) },
      ...SUITE_RATES.map(([key, label]) => ({
        key, label, filter: false, value: (r) => (counted(r, key) ? r[key].rate : -1), cell: rateOf(key),
      })),
      { key: "samples", label: "Samples", numeric: true, filter: false, cell: (r) => {
        // failed: no answer in time, or an empty one (scored 0), by kind
        const failed = Object.entries(r.failures || {}).map(([k, n]) => `${n} ${k}`).join(", ");
        return failed ? `${r.samples} (${failed})` : String(r.samples);
      } },
    ],
  });
  return h("section", { class: "card", "data-testid": "suite-card" },
    h("h2", { text: "Review suite" }),
    h("p", { class: "chart-note" }, about),
    // a bug without its control leaves pairs, precision and recall at "–": say why
    warnings.map((said) => notice("warn", "Unpaired tasks", said)),
    runPanel, table.el);
}

// each shape's ratings: the chance a model is judged better than an average one of the shape,
// from verdicts on one panel, suite tasks and races, with its 95% interval. Each shape's table
// sits in a fold built when first opened: at hundreds of models, four tables drawn at once were
// most of the page's elements. The shape with the most comparisons is open.
function ratingsCard(doc) {
  const shapes = (doc.data || []).filter((r) => r.models.length);
  // a large roster's first fit since the gateway started takes a while: said, not waited for
  const fitting = (doc.data || []).filter((r) => r.fitting).map((r) => r.shape);
  const fittingNote = fitting.length ? h("p", { class: "chart-note", "data-testid": "ratings-fitting" },
    `Fitting the ratings on ${fitting.join(", ")} for the first time since the gateway started: `
    + "with hundreds of models this takes a while. Reload the page in a minute.") : null;
  if (!shapes.length) {
    return fittingNote && h("section", { class: "card", "data-testid": "ratings-card" },
      h("h2", { text: "Ratings" }), fittingNote);
  }
  const sources = (r) => Object.entries(r.sources).filter(([, n]) => n).map(([k, n]) => `${fmt.count(n)} from ${k}`).join(", ");
  const first = shapes.reduce((a, b) => (b.comparisons > a.comparisons ? b : a));
  const table = (r) => dataTable({
    label: `Ratings on ${r.shape}`,
    rows: r.models,
    short: true,
    rowId: (m) => m.alias,
    sort: { key: "rating", dir: "desc" },
    filterHint: "Filter by model",
    columns: [
      { key: "alias", label: "Model", cell: (m) => modelLink(m.alias) },
      { key: "rating", label: "Rating (95% interval)", filter: false,
        cell: (m) => rateCell(m.rating, m.interval, m.wins, m.losses) },
      { key: "wins", label: "Won", numeric: true, filter: false },
      { key: "losses", label: "Lost", numeric: true, filter: false },
    ],
  }).el;
  const fold = (r) => {
    const body = h("div", { class: "fold-body" });
    const open = r === first;
    const el = h("details", { class: "fold", open },
      h("summary", null, `Ratings of ${fmt.plural(r.models.length, "model")} on ${r.shape}`), body);
    if (open) body.append(table(r));
    else el.addEventListener("toggle", () => { if (el.open && !body.firstChild) body.append(table(r)); });
    return el;
  };
  return h("section", { class: "card", "data-testid": "ratings-card" },
    h("h2", { text: "Ratings" }),
    h("p", { class: "chart-note" }, "The chance a model's answer is judged better than an average model's on the same shape of work, "
      + "fitted from answers judged apart on one panel (one useful, the other not), suite tasks one got right and the other wrong, "
      + "and race totals. The line is its 95% interval; a suggestion to change a collection needs intervals that stay apart "
      + "even when corrected for every candidate."),
    fittingNote,
    shapes.map((r) => h("div", { class: "stack", "data-shape": r.shape },
      h("h3", { text: `${r.shape}: ${fmt.count(r.comparisons)} comparisons (${sources(r)})` }),
      // a large roster's fit takes seconds: these are the last figures while a newer fit is made
      r.refitting ? h("p", { class: "chart-note", "data-testid": "ratings-refitting" },
        "Updating: these figures are from before the newest verdicts; reload in a moment for the new ones.") : null,
      fold(r))));
}

// the ratings card once its answer comes (before or after the rest of the page is drawn);
// until then a card that says it is on its way
function ratingsSlot(answer) {
  const slot = h("div", { "data-testid": "ratings-slot" }, h("section", { class: "card" },
    h("h2", { text: "Ratings" }), loading("Fitting the ratings…")));
  answer.then((doc) => {
    const card = ratingsCard(doc);
    replace(slot, card);
    slot.hidden = !card;
  }, (err) => {
    if (isAbort(err)) return;
    replace(slot, h("section", { class: "card" }, h("h2", { text: "Ratings" }),
      notice("error", "The ratings could not be read", err.message)));
  });
  return slot;
}

export async function render(root, ctx) {
  const shape = ctx.params.get("shape") || "all";
  // the ratings are not waited for: a shape whose comparisons changed is refitted when asked,
  // which at hundreds of models takes seconds, so the rest of the page is drawn first
  const ratingsSection = ratingsSlot(api.get(`/api/ratings${query({ shape })}`, { signal: ctx.signal }));
  // the shapes come with the evidence: the whole roster (GET /api/models) is not needed here
  const [ev, suite, judgeChecks] = await Promise.all([
    api.get(`/api/evidence${query({ shape })}`, { signal: ctx.signal }),
    api.get("/api/suite", { signal: ctx.signal }),
    api.get("/api/judge/checks", { signal: ctx.signal }),
  ]);
  const judgeSection = judgeChecksCard(judgeChecks);
  // a run that ends while the page is open shows its results: the page is read again
  const suiteSection = suiteCard(suite.data || [], suite.warnings || [],
    suiteRunPanel(ctx, { onEnded: () => ctx.navigate(location.hash) }));
  const rows = ev.data || [];
  const shapes = [...new Set([...(ev.shapes || []), ...rows.map((r) => r.shape).filter(Boolean)])].sort();
  const picker = select([["all", "All shapes"], ...shapes.map((x) => [x, x])], shape);
  picker.addEventListener("change", () => ctx.navigate(picker.value === "all" ? "#/evidence" : `#/evidence?shape=${encodeURIComponent(picker.value)}`));
  const withShape = new Set(rows.map((r) => r.shape)).size > 1;
  const head = pageHead("Evidence", "What the verdicts say about each model: how often its answers were "
    + "useful, how fast it answers and how it fails. Verdicts are recorded on Panels and Ask.",
  h("div", { class: "row" }, field("Shape", picker)));

  if (!rows.length) {
    replace(root, head, h("div", { class: "stack" }, emptyState("No evidence yet",
      "Evidence appears once panels have been asked and their answers judged.",
      linkButton("Ask a collection", "#/ask", "primary"), linkButton("Judge answers on Panels", "#/panels")),
    ratingsSection, suiteSection, judgeSection));
    return;
  }

  const judged = rows.filter((r) => r.useful + r.not_useful > 0)
    .sort((a, b) => (b.useful + b.not_useful) - (a.useful + a.not_useful));
  const byJudged = judged.slice(0, CHART_ROWS);
  const bySeats = rows.slice().sort((a, b) => (b.seats || 0) - (a.seats || 0)).slice(0, CHART_ROWS);
  const more = (n, what) => (n > CHART_ROWS ? `The ${CHART_ROWS} with the most ${what} of ${fmt.count(n)}; every one is in the table below.` : null);

  const timeSlot = h("div", { class: "chart", "data-testid": "seats-chart" }, loading("Drawing…"));
  // drawn at the width they will be shown at, so their text stays the page's size
  const full = Math.max(300, Math.round((root.clientWidth || 1100) - 50));
  // the two half-width cards sit side by side only on a wide screen (.grid.halves)
  const half = full < 880 ? full : Math.round(full / 2 - 40);
  const rate = rateChart(byJudged, { withShape, width: full });
  const times = timeChart(bySeats, { withShape, width: half });
  const fails = failureChart(rows, { width: half });
  const totals = rows.reduce((acc, r) => {
    acc.useful += r.useful || 0; acc.not += r.not_useful || 0; acc.false += r.false_claims || 0; acc.seats += r.seats || 0;
    return acc;
  }, { useful: 0, not: 0, false: 0, seats: 0 });

  // the table is built when first unfolded: most visits read the charts only
  const foldBody = h("div", { class: "fold-body" });
  const fold = h("details", { class: "fold" },
    h("summary", null, `Table: every model and shape (${fmt.count(rows.length)} rows)`), foldBody);
  fold.addEventListener("toggle", () => { if (fold.open && !foldBody.firstChild) foldBody.append(makeTable().el); });
  const makeTable = () => dataTable({
    label: "Evidence per model and shape",
    rows,
    sort: { key: "judged", dir: "desc" },
    filterHint: "Filter by model or shape",
    columns: [
      { key: "alias", label: "Model", cell: (r) => modelLink(r.alias) },
      { key: "shape", label: "Shape" },
      { key: "judged", label: "Useful (95% interval)", value: (r) => r.useful + r.not_useful, filter: false,
        cell: (r) => rateCell(r.useful + r.not_useful ? r.useful / (r.useful + r.not_useful) : null, r.interval, r.useful, r.not_useful) },
      { key: "useful", label: "Useful", numeric: true, filter: false },
      { key: "not_useful", label: "Not useful", numeric: true, filter: false },
      { key: "false_claims", label: "False claims", numeric: true, filter: false },
      { key: "seats", label: "Seats", numeric: true, filter: false },
      { key: "p50", label: "p50", numeric: true, filter: false, cell: (r) => fmt.seconds(r.p50) },
      { key: "p95", label: "p95", numeric: true, filter: false, cell: (r) => fmt.seconds(r.p95) },
      { key: "failures", label: "Failures", value: (r) => Object.values(r.failures || {}).reduce((a, b) => a + b, 0) || null,
        cell: (r) => Object.entries(r.failures || {}).map(([k, n]) => `${k} ${n}`).join(", ") || null, numeric: false },
    ],
  });

  replace(root, head,
    h("div", { class: "stats" },
      h("div", { class: "stat" }, h("div", { class: "stat-value", text: fmt.count(totals.seats) }), h("div", { class: "stat-label", text: "seats" })),
      h("div", { class: "stat" }, h("div", { class: "stat-value", text: fmt.count(totals.useful) }), h("div", { class: "stat-label", text: "useful" })),
      h("div", { class: "stat" }, h("div", { class: "stat-value", text: fmt.count(totals.not) }), h("div", { class: "stat-label", text: "not useful" })),
      h("div", { class: "stat" }, h("div", { class: "stat-value", text: fmt.count(totals.false) }), h("div", { class: "stat-label", text: "false claims" }))),
    h("div", { class: "grid" },
      chartCard("Useful answers, with 95% intervals",
        more(judged.length, "verdicts") || "The dot is the share of answers judged useful; the line is where the true rate likely lies. Few verdicts make a wide line.",
        rate || notice("", "No verdict yet", "Open a seat on Panels and say whether its answer was useful.")),
      chartCard("Seats per day, last 30 days", "How often each model sat in a panel: the busiest stacked, the rest summed as one line on the right-hand axis.", timeSlot),
      h("div", { class: "grid halves" },
        chartCard("Answer time", more(rows.length, "seats") || "Solid: half the answers came within this time (p50). Light: 95% did (p95).",
          times || notice("", "No answer timed yet")),
        chartCard("Failures by kind", "Seats that did not answer, by what went wrong.",
          fails || h("p", { class: "muted" }, "No failure recorded.")))),
    h("div", { class: "stack" }, fold, ratingsSection, suiteSection, judgeSection));

  // drawn at the slot's own width (and again when it changes much), so the labels stay legible
  let drawnAt = 0;
  const draw = () => {
    const w = Math.round(timeSlot.clientWidth);
    if (!w || Math.abs(w - drawnAt) < 24) return;
    drawnAt = w;
    const chart = seatsPerDay(ev.buckets || {}, { width: Math.max(280, w) });
    replace(timeSlot, chart || h("p", { class: "muted" }, "No seat in the last 30 days."));
  };
  draw();
  const resize = new ResizeObserver(draw);
  resize.observe(timeSlot);
  ctx.onCleanup(() => resize.disconnect());
}
