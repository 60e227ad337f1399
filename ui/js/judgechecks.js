// Evidence: how each judge scored against the verdicts people gave (GET /api/judge/checks: the
// latest `panelist judge check` per judge and shape). Each figure beside what a constant judge
// and a length-only judge score on the same panels, its 95% interval under it, and the findings
// (a judge no better than a baseline) in words. Built with textContent only (dom.js).

import { h } from "./dom.js";
import * as fmt from "./format.js";
import { dataTable } from "./table.js";

// the figures, in the order shown, with the label of their column
const FIGURES = [
  ["kappa", "κ (useful / not)"], ["accuracy", "Pair accuracy"], ["flip_rate", "Flip rate"],
  ["own_family_lift", "Own-family lift"], ["length_slope", "Length slope"],
];

function number(v) {
  if (typeof v !== "number" || !Number.isFinite(v)) return "–";
  return Math.abs(v) < 0.005 ? "0.00" : v.toFixed(2);   // never "-0.00"
}

// a figure: its value, its interval under it, and the two baselines' values beside
function figureCell(entry, key) {
  const own = (entry.figures || {})[key] || {};
  const base = entry.baselines || {};
  const iv = Array.isArray(own.interval) ? `${number(own.interval[0])} to ${number(own.interval[1])}` : "no interval";
  const beside = `constant ${number(((base.constant || {})[key] || {}).value)} · length ${number(((base.length || {})[key] || {}).value)}`;
  return h("span", { class: "figure", title: `95% interval ${iv}; ${beside}` },
    h("strong", { text: number(own.value) }),
    h("span", { class: "sub", text: iv }),
    h("span", { class: "sub muted", text: beside }));
}

export function judgeChecksCard(doc) {
  const rows = (doc && doc.data) || [];
  const explain = (doc && doc.explain) || {};
  const about = h("details", { class: "fold" }, h("summary", null, "What the figures mean"),
    h("dl", { class: "explain" }, Object.entries(explain).flatMap(([key, text]) => [
      h("dt", { text: (FIGURES.find(([k]) => k === key) || [key, key === "baselines" ? "Baselines" : key])[1] }),
      h("dd", { text })])));
  const intro = "A judge (an LLM that grades answers) run blind over panels people already judged: how often it agrees "
    + "with them. Intervals come from resampling the panels; the sample is of judged panels, which may not be like "
    + "all of your traffic.";
  if (!rows.length) {
    return h("section", { class: "card", "data-testid": "judge-checks-card" },
      h("h2", { text: "Judges against people" }),
      h("p", { class: "chart-note" }, `No judge has been checked yet. ${intro} A check asks a judge about many `
        + "answers, so it costs money: it is started where the data folder is kept, and says its cost before it runs."),
      about);
  }
  const table = dataTable({
    label: "Judges against people",
    rows,
    short: true,
    rowId: (e) => `${e.judge} ${e.shape}`,
    sort: { key: "judge", dir: "asc" },
    filterHint: "Filter by judge or shape",
    columns: [
      { key: "judge", label: "Judge" },
      { key: "shape", label: "Shape" },
      { key: "panels", label: "Panels", numeric: true, filter: false },
      ...FIGURES.map(([key, label]) => ({
        key, label, filter: false,
        value: (e) => (((e.figures || {})[key] || {}).value ?? -Infinity),
        cell: (e) => figureCell(e, key),
      })),
      { key: "findings", label: "Findings", value: (e) => (e.findings || []).join("; "),
        cell: (e) => ((e.findings || []).length
          ? h("ul", { class: "findings" }, e.findings.map((f) => h("li", { text: fmt.sentence(f) })))
          : h("span", { class: "muted", text: "clears both baselines" })) },
      { key: "ts", label: "Checked", filter: false, cell: (e) => h("span", { title: e.check || "", text: e.ts ? fmt.day(fmt.epochOf(e.ts)) : "–" }) },
    ],
  });
  return h("section", { class: "card", "data-testid": "judge-checks-card" },
    h("h2", { text: "Judges against people" }),
    h("p", { class: "chart-note" }, `${intro} Under each figure: its 95% interval, then what a constant judge `
      + "(always useful, always the first shown) and a length-only judge (the longer answer) score."),
    table.el, about);
}
