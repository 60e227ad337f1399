// A time axis (GET /api/series): seats and error rate, then the answer-time p50 and p95, per
// time bucket of the last hour (5-minute buckets), day (hours) or week (UTC days), for one model,
// endpoint or gateway key, or the whole gateway. A window switch redraws both charts.
// Drawn as SVG from attributes and classes only (the CSP allows no inline style), at the width
// the box is shown at; every bar and point carries its exact figures as a title. A bucket with
// no answer has no quantile: its p50/p95 lines break there rather than fall to zero.

import { api } from "./api.js";
import { h, replace, s } from "./dom.js";
import * as fmt from "./format.js";
import { labelEvery, ticks } from "./axes.js";
import { button, emptyState, errorState, loading, sectionHead } from "./ui.js";

export const WINDOWS = [["hour", "Hour"], ["day", "Day"], ["week", "Week"]];
const SPOKEN = { hour: "hour", day: "day", week: "week" };
const HEIGHT = 180;
const PAD = { top: 10, bottom: 24 };

const weekday = new Intl.DateTimeFormat(undefined, { weekday: "short", day: "numeric", timeZone: "UTC" });

/** A bucket's start as a short tick: "14:05" within a day, "Thu 3" (its UTC day) for a week. */
export function tickLabel(start, width) {
  return width >= 86400 ? weekday.format(new Date(start * 1000)) : fmt.clock(start);
}

function span(b, width) {
  return width >= 86400 ? `${tickLabel(b.start, width)} (UTC day)`
    : `${fmt.clock(b.start)}–${fmt.clock(b.start + width)}`;
}

// the frame both charts share: a left axis, an optional right one, and the time ticks below
function frame(data, width, left, right, { leftText, rightText, label }) {
  const tickW = (list, text) => 10 + 7 * Math.max(...list.map((v) => text(v).length));
  const padL = Math.max(60, tickW(left, leftText));   // the same in both charts, so their buckets line up
  const padR = Math.max(48, right ? tickW(right, rightText) : 0);
  const plotW = Math.max(60, width - padL - padR);
  const plotH = HEIGHT - PAD.top - PAD.bottom;
  const n = data.buckets.length;
  const slot = plotW / n;
  const x = (i) => padL + slot * i + slot / 2;
  const yOf = (list) => (v) => PAD.top + plotH - (v / list[list.length - 1]) * plotH;
  const svg = s("svg", { viewBox: `0 0 ${width} ${HEIGHT}`, width, height: HEIGHT, role: "img", class: "series-chart", "aria-label": label });
  const yl = yOf(left);
  for (const v of left) {
    svg.append(s("line", { class: "gridline", x1: padL, x2: padL + plotW, y1: yl(v), y2: yl(v) }),
      s("text", { class: "muted tick", x: padL - 6, y: yl(v) + 4, "text-anchor": "end", text: leftText(v) }));
  }
  if (right) {
    const yr = yOf(right);
    for (const v of right) svg.append(s("text", { class: "muted tick right-tick", x: padL + plotW + 6, y: yr(v) + 4, text: rightText(v) }));
  }
  const axis = s("g", { class: "axis-x" });
  const every = labelEvery(n, plotW, 48);
  for (let i = n - 1; i >= 0; i -= every) {   // the newest bucket always has its label
    axis.append(s("text", { class: "muted tick", x: x(i), y: HEIGHT - 8, "text-anchor": "middle", text: tickLabel(data.buckets[i].start, data.width) }));
  }
  svg.append(axis, s("line", { class: "axis", x1: padL, x2: padL + plotW, y1: PAD.top + plotH, y2: PAD.top + plotH }));
  return { svg, x, slot, yLeft: yl, yRight: right ? yOf(right) : null };
}

// a polyline per run of buckets that have a value: a bucket without one breaks the line
function runs(values, x, y) {
  const out = [];
  let run = [];
  values.forEach((v, i) => {
    if (typeof v === "number") run.push(`${x(i).toFixed(1)},${y(v).toFixed(1)}`);
    else if (run.length) { out.push(run); run = []; }
  });
  if (run.length) out.push(run);
  return out;
}

/** Seats per bucket as bars (failed seats on top, in the failure colour) and the error rate as a
 *  line on the right axis. */
export function seatsChart(data, width) {
  const b = data.buckets;
  const left = ticks(Math.max(...b.map((x) => x.seats)), 4, { whole: true });
  const right = [0, 0.25, 0.5, 0.75, 1];
  const f = frame(data, width, left, right, {
    leftText: fmt.compact, rightText: (v) => `${v * 100}%`,
    label: `Seats and error rate per bucket over the last ${SPOKEN[data.window]}`,
  });
  const barW = Math.max(1, Math.min(28, f.slot * 0.7));
  const bars = s("g", { class: "bars" });
  b.forEach((x, i) => {
    if (!x.seats) return;
    const title = `${span(x, data.width)}: ${fmt.plural(x.seats, "seat")}, ${fmt.count(x.failed)} failed`
      + (x.error_rate === null ? "" : ` (error rate ${fmt.percent(x.error_rate)})`);
    const top = f.yLeft(x.seats);
    const split = f.yLeft(x.seats - x.failed);
    bars.append(s("rect", { class: "series-seats", x: f.x(i) - barW / 2, y: top, width: barW, height: Math.max(1, f.yLeft(0) - top), "data-start": x.start },
      s("title", { text: title })));
    if (x.failed) {
      bars.append(s("rect", { class: "series-failed", x: f.x(i) - barW / 2, y: top, width: barW, height: Math.max(1, split - top) },
        s("title", { text: title })));
    }
  });
  f.svg.append(bars);
  const rates = b.map((x) => x.error_rate);
  for (const run of runs(rates, f.x, f.yRight)) f.svg.append(s("polyline", { class: "series-rate", points: run.join(" ") }));
  rates.forEach((v, i) => {
    if (typeof v === "number") {
      f.svg.append(s("circle", { class: "series-rate-dot", cx: f.x(i), cy: f.yRight(v), r: 3 },
        s("title", { text: `${span(b[i], data.width)}: error rate ${fmt.percent(v)}` })));
    }
  });
  return f.svg;
}

/** The answer-time p50 and p95 per bucket, as two lines that break where a bucket has no answer. */
export function timesChart(data, width) {
  const b = data.buckets;
  const top = Math.max(0.001, ...b.map((x) => x.p95 ?? x.p50 ?? 0));
  const left = ticks(top, 4);
  const f = frame(data, width, left, null, {
    leftText: fmt.seconds, label: `Answer time p50 and p95 per bucket over the last ${SPOKEN[data.window]}`,
  });
  for (const [key, cls] of [["p95", "series-p95"], ["p50", "series-p50"]]) {
    const values = b.map((x) => x[key]);
    for (const run of runs(values, f.x, f.yLeft)) f.svg.append(s("polyline", { class: cls, points: run.join(" ") }));
    values.forEach((v, i) => {
      if (typeof v === "number") {
        f.svg.append(s("circle", { class: `${cls}-dot`, cx: f.x(i), cy: f.yLeft(v), r: 3, "data-start": b[i].start },
          s("title", { text: `${span(b[i], data.width)}: ${key} ${fmt.seconds(v)} of ${fmt.plural(b[i].answered, "answer")}` })));
      }
    });
  }
  return f.svg;
}

function legend(items) {
  return h("p", { class: "legend series-legend" }, items.map(([cls, text]) => h("span", null,
    h("span", { class: ["swatch", cls], "aria-hidden": "true" }), text)));
}

function summary(data) {
  const t = data.total;
  const rate = t.error_rate === null ? "" : `, error rate ${fmt.percent(t.error_rate)}`;
  const times = t.p50 === null ? "no answer" : `p50 ${fmt.seconds(t.p50)}, p95 ${fmt.seconds(t.p95)}`;
  return `Last ${SPOKEN[data.window]}: ${fmt.plural(t.seats, "seat")}, ${fmt.count(t.failed)} failed${rate}; ${times}.`;
}

/** A section charting `query` ("model=ALIAS", "endpoint=NAME", "key=NAME" or "all=1") with a
 *  window switch; `window` is the one shown first. */
export function seriesSection(query, ctx, { title = "Over time", lede = null, window = "day" } = {}) {
  let current = WINDOWS.some(([w]) => w === window) ? window : "day";
  let data = null;
  const body = h("div", { class: "series-body", "aria-live": "polite" }, loading());
  const switches = WINDOWS.map(([w, label]) => button(label, () => show(w), {
    small: true, kind: "ghost", "aria-pressed": String(w === current), dataset: { window: w },
    title: `The last ${SPOKEN[w]}`,
  }));
  const group = h("div", { class: "series-windows", role: "group", "aria-label": "Window" }, switches);
  const section = h("section", { class: "section series", "data-testid": "series" },
    sectionHead(title, lede || "Seats and error rate, then answer times (p50 and p95 of answered seats), per time bucket.", group),
    body);
  const boxes = [h("div", { class: "chart" }), h("div", { class: "chart" })];
  let drawn = 0;
  const draw = (force = false) => {
    if (!data || !data.total.seats) return;
    const width = boxes[0].clientWidth;
    if (width && (force || Math.abs(width - drawn) > 4)) {
      drawn = width;
      replace(boxes[0], seatsChart(data, width));
      replace(boxes[1], data.total.answered ? timesChart(data, width)
        : h("p", { class: "muted", text: "No answer in this window, so no answer times." }));
    }
  };
  const resize = new ResizeObserver(() => draw());
  resize.observe(boxes[0]);
  ctx.onCleanup(() => resize.disconnect());

  async function show(w) {
    current = w;
    for (const b of switches) b.setAttribute("aria-pressed", String(b.dataset.window === w));
    let got;
    try {
      got = await api.get(`/api/series?${query}&window=${encodeURIComponent(w)}`, { signal: ctx.signal });
    } catch (err) {
      if (err.name === "AbortError" || current !== w) return;
      replace(body, errorState(err, () => show(w)));
      return;
    }
    if (current !== w) return;   // a later switch won
    data = got;
    section.dataset.window = w;
    section.dataset.buckets = String(got.buckets.length);
    if (!got.total.seats) {
      replace(body, emptyState(`No seat in the last ${SPOKEN[w]}`,
        "Its seats, errors and answer times are charted here once it sits in panels; try a longer window."));
      return;
    }
    replace(body,
      h("p", { class: "muted", "data-testid": "series-summary", text: summary(got) }),
      boxes[0], legend([["series-seats", "seats"], ["series-failed", "failed"], ["series-rate", "error rate (right axis)"]]),
      boxes[1], legend([["series-p50", "p50"], ["series-p95", "p95"]]),
      h("p", { class: "muted small", text: got.quantiles }));
    draw(true);
  }
  show(current);
  return section;
}
