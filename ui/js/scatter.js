// A point per model on two measures (a race's cost per run against its score), both axes from
// zero so distances read as ratios. Points that would sit on top of each other are spread
// side by side around where they belong, with a faint mark at the true spot, and every point is
// named beside it, the names pushed apart so none covers another.
// SVG from attributes and classes only (the CSP allows no inline style).

import { h, s } from "./dom.js";
import { ticks } from "./axes.js";

const HEIGHT = 300;
const COLOURS = 8;
const RADIUS = 6;
const CLOSE = RADIUS * 2 + 2;   // nearer than this (px), two points would hide each other
const LINE = 15;                // a name's height, px

/** Groups of indexes whose pixel positions are within CLOSE of the group's first point. */
function clusters(pos) {
  const groups = [];
  pos.forEach((p, i) => {
    const near = groups.find((g) => Math.hypot(pos[g[0]].x - p.x, pos[g[0]].y - p.y) < CLOSE);
    if (near) near.push(i); else groups.push([i]);
  });
  return groups;
}

/**
 * points: [{name, x, y, title}]; xTop: the x axis' end (default: past the largest x);
 * yTop: the y axis' end; band: [lo, hi] of y to shade; formats for the ticks.
 */
export function scatter(points, { width = 640, xLabel = "", yLabel = "", yTop, xTop = null, band = null,
  xFormat = String, yFormat = String, label = "" } = {}) {
  const xTicks = ticks(xTop ?? Math.max(...points.map((p) => p.x), 0) * 1.08, 4);
  const yTicks = ticks(yTop, Math.min(7, Math.max(2, Math.round(yTop))));
  const xMax = xTicks[xTicks.length - 1];
  const yMax = Math.max(yTop, yTicks[yTicks.length - 1]);
  const padL = 46;
  const padR = 16;
  const padT = 12;
  const padB = 42;
  const plotW = Math.max(80, width - padL - padR);
  const plotH = HEIGHT - padT - padB;
  const xAt = (v) => padL + (v / xMax) * plotW;
  const yAt = (v) => padT + plotH - (v / yMax) * plotH;

  const svg = s("svg", { viewBox: `0 0 ${width} ${HEIGHT}`, width, height: HEIGHT, role: "img", class: "scatter", "aria-label": label });
  if (Array.isArray(band)) {
    const top = yAt(Math.min(yMax, band[1]));
    const bottom = yAt(Math.max(0, band[0]));
    svg.append(s("rect", { class: "band", x: padL, y: top, width: plotW, height: Math.max(2, bottom - top) }));
  }
  const axisX = s("g", { class: "axis-x" });
  for (const v of xTicks) {
    svg.append(s("line", { class: "gridline", x1: xAt(v), x2: xAt(v), y1: padT, y2: padT + plotH }));
    axisX.append(s("text", { class: "muted tick", x: xAt(v), y: padT + plotH + 16, "text-anchor": "middle", text: xFormat(v) }));
  }
  const axisY = s("g", { class: "axis-y" });
  for (const v of yTicks) {
    svg.append(s("line", { class: "gridline", x1: padL, x2: padL + plotW, y1: yAt(v), y2: yAt(v) }));
    axisY.append(s("text", { class: "muted tick", x: padL - 6, y: yAt(v) + 4, "text-anchor": "end", text: yFormat(v) }));
  }
  svg.append(axisX, axisY,
    s("line", { class: "axis", x1: padL, x2: padL, y1: padT, y2: padT + plotH }),
    s("line", { class: "axis", x1: padL, x2: padL + plotW, y1: padT + plotH, y2: padT + plotH }),
    s("text", { class: "muted axis-label", x: padL + plotW / 2, y: HEIGHT - 6, "text-anchor": "middle", text: xLabel }),
    s("text", { class: "muted axis-label", x: 12, y: padT + plotH / 2, "text-anchor": "middle", transform: `rotate(-90 12 ${padT + plotH / 2})`, text: yLabel }));

  const at = points.map((p) => ({ x: xAt(p.x), y: yAt(p.y) }));
  const drawn = at.map((p) => ({ ...p }));
  const groups = clusters(at);
  for (const group of groups) {
    if (group.length < 2) continue;
    const cx = group.reduce((a, i) => a + at[i].x, 0) / group.length;
    const cy = group.reduce((a, i) => a + at[i].y, 0) / group.length;
    // side by side, centred on the group, kept inside the plot
    const span = (group.length - 1) * CLOSE;
    const first = Math.min(Math.max(cx - span / 2, padL + RADIUS), padL + plotW - RADIUS - span);
    group.forEach((i, j) => { drawn[i] = { x: first + j * CLOSE, y: cy }; });
    svg.append(s("circle", { class: "true-spot", cx, cy, r: 2 }));
  }

  // names beside their group (right of its last point), moved down a line at a time until
  // none covers another or a point; each in its point's colour
  const groupEnd = new Map();
  for (const group of groups) {
    const xs = group.map((i) => drawn[i].x);
    for (const i of group) groupEnd.set(i, { right: Math.max(...xs), left: Math.min(...xs) });
  }
  const placed = drawn.map((d) => ({ x0: d.x - RADIUS, x1: d.x + RADIUS, y: d.y + 4 }));
  const labels = s("g", { class: "point-labels" });
  const dots = s("g", { class: "points" });
  const order = points.map((_, i) => i).sort((a, b) => drawn[a].y - drawn[b].y || drawn[a].x - drawn[b].x);
  for (const i of order) {
    const p = points[i];
    const d = drawn[i];
    const w = 7 * p.name.length + 4;
    const end = groupEnd.get(i);
    const onLeft = end.right + RADIUS + 4 + w > padL + plotW;
    const x0 = onLeft ? end.left - RADIUS - 4 - w : end.right + RADIUS + 4;
    let y = d.y + 4;
    const hits = (yy) => placed.some((b) => x0 < b.x1 && x0 + w > b.x0 && Math.abs(yy - b.y) < LINE);
    let tries = 0;
    while (hits(y) && tries < points.length + 2) { y += LINE; tries += 1; }
    placed.push({ x0, x1: x0 + w, y });
    dots.append(s("circle", { class: `point series-${(i % COLOURS) + 1}`, cx: d.x, cy: d.y, r: RADIUS, "data-name": p.name },
      s("title", { text: p.title || p.name })));
    labels.append(s("text", { class: `point-label series-${(i % COLOURS) + 1}`, x: onLeft ? x0 + w : x0, y, "text-anchor": onLeft ? "end" : "start", text: p.name }));
  }
  svg.append(dots, labels);
  return h("div", { class: "chart scatter-wrap" }, svg);
}
