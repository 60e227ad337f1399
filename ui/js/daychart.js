// Seats per day as stacked bars: the busiest few models each with a colour, stacked from the
// busiest up; the rest summed into one line on an axis of its own (on the right), because at
// hundreds of models their sum dwarfs every single model and would flatten the bars.
// Drawn as SVG from attributes and classes only (the CSP allows no inline style); every bar and
// point carries its exact count as a title, and the legend lists each series' total.

import { h, s } from "./dom.js";
import * as fmt from "./format.js";
import { labelEvery, ticks } from "./axes.js";

const DAY = 86400;
const HEIGHT = 260;
const COLOURS = 8;

/** The series drawn from a buckets answer: the `top` busiest models, then the rest summed. */
export function daySeries(buckets, top = 7) {
  const days = buckets.days || Math.max(0, ...Object.values(buckets.series || {}).map((c) => c.length));
  const all = Object.entries(buckets.series || {})
    .map(([alias, counts]) => ({ alias, counts: Array.from({ length: days }, (_, i) => counts[i] || 0) }))
    .map((x) => ({ ...x, total: x.counts.reduce((a, b) => a + b, 0) }))
    .filter((x) => x.total > 0)
    .sort((a, b) => b.total - a.total || (a.alias < b.alias ? -1 : 1));
  // one left over is drawn as itself: "1 other" would hide a name for nothing
  const keep = all.length === top + 1 ? top + 1 : top;
  const shown = all.slice(0, keep);
  const rest = all.slice(keep);
  const others = rest.length ? {
    count: rest.length,
    counts: Array.from({ length: days }, (_, i) => rest.reduce((acc, x) => acc + x.counts[i], 0)),
  } : null;
  if (others) others.total = others.counts.reduce((a, b) => a + b, 0);
  return { start: buckets.start || 0, days, shown, others };
}

/** The chart and its legend, `width` px wide (drawn at the width it is shown at, so its text
 *  stays the page's size). Null when no model had a seat. */
export function seatsPerDay(buckets, { width = 760, top = 7 } = {}) {
  const { start, days, shown, others } = daySeries(buckets, top);
  if (!shown.length) return null;
  const stackMax = Math.max(...Array.from({ length: days }, (_, i) => shown.reduce((acc, x) => acc + x.counts[i], 0)));
  const left = ticks(stackMax, 4, { whole: true });
  const right = others ? ticks(Math.max(...others.counts), 4, { whole: true }) : null;
  const tickW = (list) => 10 + 7 * Math.max(...list.map((v) => fmt.compact(v).length));
  const padL = tickW(left);
  const padR = right ? tickW(right) : 12;
  const padT = 10;
  const padB = 26;
  const plotW = Math.max(60, width - padL - padR);
  const plotH = HEIGHT - padT - padB;
  const slot = plotW / days;
  const barW = Math.max(1, Math.min(28, slot * 0.72));
  const xAt = (i) => padL + slot * i + slot / 2;
  const yLeft = (v) => padT + plotH - (v / left[left.length - 1]) * plotH;
  const yRight = right ? (v) => padT + plotH - (v / right[right.length - 1]) * plotH : null;
  const dayOf = (i) => fmt.day(start + i * DAY);

  const svg = s("svg", {
    viewBox: `0 0 ${width} ${HEIGHT}`, width, height: HEIGHT, role: "img", class: "day-chart",
    "aria-label": `Seats per day over ${days} days, stacked for the ${shown.length} busiest models`
      + (others ? `, with the other ${others.count} models summed on the right axis` : ""),
  });
  const axisLeft = s("g", { class: "axis-left" });
  for (const v of left) {
    const y = yLeft(v);
    svg.append(s("line", { class: "gridline", x1: padL, x2: padL + plotW, y1: y, y2: y }));
    axisLeft.append(s("text", { class: "muted tick", x: padL - 6, y: y + 4, "text-anchor": "end", text: fmt.compact(v) }));
  }
  svg.append(axisLeft);
  if (right) {
    const axisRight = s("g", { class: "axis-right" });
    for (const v of right) {
      axisRight.append(s("text", { class: "muted tick others-tick", x: padL + plotW + 6, y: yRight(v) + 4, "text-anchor": "start", text: fmt.compact(v) }));
    }
    svg.append(axisRight);
  }
  const axisX = s("g", { class: "axis-x" });
  const every = labelEvery(days, plotW, 52);
  for (let i = days - 1; i >= 0; i -= every) {   // the newest day always has its label
    axisX.append(s("text", { class: "muted tick", x: xAt(i), y: HEIGHT - 8, "text-anchor": "middle", text: dayOf(i) }));
  }
  svg.append(axisX, s("line", { class: "axis", x1: padL, x2: padL + plotW, y1: padT + plotH, y2: padT + plotH }));

  const bars = s("g", { class: "bars" });
  for (let i = 0; i < days; i += 1) {
    let base = 0;
    shown.forEach((x, k) => {
      const n = x.counts[i];
      if (!n) return;
      const y0 = yLeft(base);
      const y1 = yLeft(base + n);
      base += n;
      bars.append(s("rect", {
        class: `bar series-${(k % COLOURS) + 1}`, x: xAt(i) - barW / 2, y: y1, width: barW, height: Math.max(1, y0 - y1),
        "data-alias": x.alias,
      }, s("title", { text: `${dayOf(i)} · ${x.alias}: ${fmt.plural(n, "seat")}` })));
    });
  }
  svg.append(bars);
  if (others) {
    const points = others.counts.map((n, i) => `${xAt(i).toFixed(1)},${yRight(n).toFixed(1)}`).join(" ");
    const line = s("g", { class: "others" }, s("polyline", { class: "others-line", points }));
    others.counts.forEach((n, i) => line.append(s("circle", { class: "others-dot", cx: xAt(i), cy: yRight(n), r: days <= 31 ? 3 : 2 },
      s("title", { text: `${dayOf(i)} · the other ${others.count} models: ${fmt.plural(n, "seat")}` }))));
    svg.append(line);
  }

  const legend = h("ul", { class: "legend day-legend", "aria-label": "Seats in these days" },
    shown.map((x, k) => h("li", { "data-alias": x.alias },
      h("span", { class: `swatch s${(k % COLOURS) + 1}`, "aria-hidden": "true" }),
      h("span", { class: "legend-name", text: x.alias }), " ",
      h("span", { class: "legend-value", text: fmt.compact(x.total), title: fmt.plural(x.total, "seat") }))),
    others ? h("li", { class: "legend-others" },
      h("span", { class: "swatch others", "aria-hidden": "true" }),
      h("span", { class: "legend-name", text: `${fmt.count(others.count)} other models, summed (line, right axis)` }), " ",
      h("span", { class: "legend-value", text: fmt.compact(others.total), title: fmt.plural(others.total, "seat") })) : null);
  return h("div", { class: "chart day-chart-wrap" }, svg, legend);
}
