// Charts. Per-model comparisons are small SVG charts drawn here from attributes only (no inline
// style, as the CSP requires); seats per day are in daychart.js, the race's scatter in scatter.js.
// Colours come from the theme's CSS custom properties, so both themes read well.

import { h, s } from "./dom.js";
import * as fmt from "./format.js";

function labelFor(row, withShape) {
  return withShape && row.shape ? `${row.alias} · ${row.shape}` : row.alias;
}

/** Useful rate with its 95% interval per model: a forest plot, the best-judged first. */
export function rateChart(rows, { withShape = false, width = 760 } = {}) {
  const judged = rows.filter((r) => (r.useful || 0) + (r.not_useful || 0) > 0)
    .map((r) => ({ ...r, n: r.useful + r.not_useful, rate: r.useful / (r.useful + r.not_useful) }))
    .sort((a, b) => b.rate - a.rate || b.n - a.n);
  if (!judged.length) return null;
  const rowH = 26;
  const labelW = Math.min(260, width * 0.4, Math.max(120, 8 * Math.max(...judged.map((r) => labelFor(r, withShape).length))));
  const rightW = 110;
  const plotW = width - labelW - rightW;
  const top = 22;
  const height = top + judged.length * rowH + 6;
  const x = (v) => labelW + v * plotW;
  const svg = s("svg", { viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": "Useful rate per model with 95% intervals" });
  // quarters where they fit, halves on a narrow screen
  for (const t of plotW < 240 ? [0, 0.5, 1] : [0, 0.25, 0.5, 0.75, 1]) {
    svg.append(s("line", { class: "gridline", x1: x(t), x2: x(t), y1: top - 6, y2: height - 4 }),
      s("text", { class: "muted", x: x(t), y: 12, "text-anchor": "middle", text: `${t * 100}%` }));
  }
  judged.forEach((r, i) => {
    const y = top + i * rowH + rowH / 2;
    const [lo, hi] = Array.isArray(r.interval) ? r.interval : [r.rate, r.rate];
    svg.append(
      s("text", { x: labelW - 10, y: y + 4, "text-anchor": "end", text: labelFor(r, withShape) }),
      s("line", { class: "whisker", x1: x(lo), x2: x(hi), y1: y, y2: y }),
      s("line", { class: "whisker", x1: x(lo), x2: x(lo), y1: y - 5, y2: y + 5 }),
      s("line", { class: "whisker", x1: x(hi), x2: x(hi), y1: y - 5, y2: y + 5 }),
      s("circle", { class: "rate-point", cx: x(r.rate), cy: y, r: 5 },
        s("title", { text: `${labelFor(r, withShape)}: ${fmt.percent(r.rate)} useful of ${r.n} (95% interval ${fmt.interval(r.interval)})` })),
      s("text", { class: "muted", x: width - rightW + 10, y: y + 4, text: `${fmt.percent(r.rate)} of ${fmt.count(r.n)}` }));
  });
  return h("div", { class: "chart" }, svg);
}

/** Answer time p50 and p95 per model, as paired horizontal bars, the fastest first. */
export function timeChart(rows, { withShape = false, width = 760 } = {}) {
  const timed = rows.filter((r) => typeof r.p50 === "number").sort((a, b) => a.p50 - b.p50);
  if (!timed.length) return null;
  const rowH = 26;
  const labelW = Math.min(260, width * 0.4, Math.max(120, 8 * Math.max(...timed.map((r) => labelFor(r, withShape).length))));
  const rightW = 130;
  const plotW = width - labelW - rightW;
  const top = 22;
  const height = top + timed.length * rowH + 6;
  const max = Math.max(...timed.map((r) => r.p95 ?? r.p50), 0.001);
  const x = (v) => labelW + (v / max) * plotW;
  const svg = s("svg", { viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": "Answer time per model, p50 and p95" });
  for (const t of [0, 0.5, 1]) {
    svg.append(s("line", { class: "gridline", x1: x(t * max), x2: x(t * max), y1: top - 6, y2: height - 4 }),
      s("text", { class: "muted", x: x(t * max), y: 12, "text-anchor": "middle", text: fmt.seconds(t * max) }));
  }
  timed.forEach((r, i) => {
    const y = top + i * rowH;
    const p95 = r.p95 ?? r.p50;
    svg.append(
      s("text", { x: labelW - 10, y: y + rowH / 2 + 4, "text-anchor": "end", text: labelFor(r, withShape) }),
      s("rect", { class: "bar-p95", x: labelW, y: y + 5, width: Math.max(1, x(p95) - labelW), height: rowH - 10, rx: 3 }),
      s("rect", { class: "bar-p50", x: labelW, y: y + 5, width: Math.max(1, x(r.p50) - labelW), height: rowH - 10, rx: 3 },
        s("title", { text: `${labelFor(r, withShape)}: half answer within ${fmt.seconds(r.p50)}, 95% within ${fmt.seconds(p95)}` })),
      s("text", { class: "muted", x: width - rightW + 10, y: y + rowH / 2 + 4, text: `${fmt.seconds(r.p50)} · ${fmt.seconds(p95)}` }));
  });
  return h("div", { class: "chart" }, svg);
}

/** Failures by kind over all models: one bar per kind. */
export function failureChart(rows, { width = 760 } = {}) {
  const totals = new Map();
  for (const r of rows) for (const [kind, n] of Object.entries(r.failures || {})) totals.set(kind, (totals.get(kind) || 0) + n);
  const kinds = [...totals.entries()].sort((a, b) => b[1] - a[1]);
  if (!kinds.length) return null;
  const rowH = 24;
  const labelW = 140;
  const rightW = 70;
  const plotW = width - labelW - rightW;
  const height = kinds.length * rowH + 4;
  const max = Math.max(...kinds.map(([, n]) => n));
  const svg = s("svg", { viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": "Failures by kind" });
  kinds.forEach(([kind, n], i) => {
    const y = i * rowH;
    svg.append(
      s("text", { x: labelW - 10, y: y + rowH / 2 + 4, "text-anchor": "end", text: kind }),
      s("rect", { class: "fail-bar", x: labelW, y: y + 4, width: Math.max(2, (n / max) * plotW), height: rowH - 8, rx: 3 }),
      s("text", { class: "muted", x: width - rightW + 10, y: y + rowH / 2 + 4, text: fmt.count(n) }));
  });
  return h("div", { class: "chart" }, svg);
}
