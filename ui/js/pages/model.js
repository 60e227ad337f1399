// A model's page (#/models/ALIAS): what is known of one model, from GET /api/models/{alias}:
// its status and facts with their sources, verdicts and answer times per shape, its latency
// over its last seats, its newest panels and failures, its suite and race results and alerts,
// with Probe, Retire / Restore and Edit. Every model name in the dashboard links here.

import { api, seg } from "../api.js";
import { h, replace, s } from "../dom.js";
import * as fmt from "../format.js";
import {
  button, emptyState, linkButton, modelLink, modelStatus, notice, openSeatLater, pageHead,
  rateCell, sectionHead, timeAgo, toast,
} from "../ui.js";
import { modelDialog, probeModel } from "./endpoints.js";
import { indexBehind } from "../panelfilters.js";
import { alertMessage } from "../alerts.js";
import { seriesSection, tickLabel } from "../series.js";
import { ticks } from "../axes.js";

export const title = "Model";

// the failures and panels below come from the search index; after a restart it reads the
// newest panels first, so what is missing is the oldest
function indexNotice(index) {
  const note = notice("", `The search index is catching up: ${indexBehind(index)}`,
    `Its failures and panels below come from the ${fmt.count(index.indexed)} panels read so far, `
    + "the newest first; older ones appear as it reads on. Reload to see them.");
  note.dataset.testid = "index-note";
  return note;
}

const FACT_LABELS = {
  context: "Context window", max_output: "Most output tokens", vision: "Vision", tools: "Tools",
  price_in: "Price in (per million)", price_out: "Price out (per million)", currency: "Currency",
  family: "Family", grade: "Grade",
};

function table(label, head, rows) {
  return h("div", { class: "table-wrap", role: "region", "aria-label": label, tabindex: "0" },
    h("table", null,
      h("caption", { class: "visually-hidden", text: label }),
      h("thead", null, h("tr", null, head.map(([text, numeric]) => h("th", { scope: "col", class: numeric ? "numeric" : null, text })))),
      h("tbody", null, rows)));
}

function failuresText(failures) {
  const kinds = Object.entries(failures || {}).sort((a, b) => b[1] - a[1]);
  return kinds.length ? kinds.map(([k, n]) => `${k} ${fmt.count(n)}`).join(", ") : "none";
}

function quantile(sorted, q) {
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] : null;
}

// an axis step as short as it can say it exactly: "0", "0.5 ms", "250 ms", "1.5 s"
function axisTime(v) {
  if (v === 0) return "0";
  return v < 1 ? `${+(v * 1000).toPrecision(3)} ms` : `${+v.toPrecision(3)} s`;
}

// answer seconds of its last seats, oldest left: answered ones as dots, failed ones as crosses;
// drawn at the width it is shown at, so its labels read the same on a phone
export function latencyChart(points, width = 760) {
  const W = Math.max(280, Math.round(width));
  const H = 200;
  const L = 56;
  const B = 24;
  const ts = points.map((p) => p[0]).filter((t) => typeof t === "number");
  const secs = points.map((p) => p[1]).filter((v) => typeof v === "number");
  const t0 = Math.min(...ts);
  const t1 = Math.max(...ts);
  // round steps up to a little past the 99th percentile (slower outliers sit on the top line)
  const steps = ticks(Math.max(0.001, quantile(secs.slice().sort((a, b) => a - b), 0.99) * 1.1), 3);
  const top = steps[steps.length - 1];
  const x = (t) => L + (t1 > t0 ? ((t - t0) / (t1 - t0)) * (W - L - 8) : (W - L - 8) / 2);
  const y = (v) => H - B - (Math.min(v, top) / top) * (H - B - 8);
  // all dots in one path and all crosses in another: 500 seats are two elements, not 500
  let dots = "";
  let crosses = "";
  for (const [t, v, status] of points) {
    if (typeof t !== "number" || typeof v !== "number") continue;
    const px = x(t);
    const py = y(v);
    if (status === "ok" || status === "tool_calls") dots += `M${(px - 2.5).toFixed(1)} ${py.toFixed(1)}a2.5 2.5 0 1 0 5 0a2.5 2.5 0 1 0 -5 0`;
    else crosses += `M${(px - 3).toFixed(1)} ${(py - 3).toFixed(1)}l6 6m0 -6l-6 6`;
  }
  const marks = [dots ? s("path", { class: "point", d: dots }) : null,
    crosses ? s("path", { class: "fail", d: crosses }) : null];
  const grid = steps.map((v) => [
    s("line", { class: "grid", x1: L, x2: W - 4, y1: y(v).toFixed(1), y2: y(v).toFixed(1) }),
    s("text", { class: "axis", x: L - 6, y: (y(v) + 4).toFixed(1), "text-anchor": "end" }, axisTime(v))]);
  // the ends as short times ("14:05", or "Thu 3 14:05" past a day); the full time on hover
  const end = (t) => (t1 - t0 >= 86400 ? `${tickLabel(t, 86400)} ${fmt.clock(t)}` : fmt.clock(t));
  return s("svg", { class: "latency-chart", viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: "img",
    "aria-label": `Answer time of each of its last ${points.length} seats, oldest on the left` },
  grid,
  s("text", { class: "axis", x: L, y: H - 6 }, s("title", null, fmt.when(t0)), end(t0)),
  s("text", { class: "axis", x: W - 4, y: H - 6, "text-anchor": "end" }, s("title", null, fmt.when(t1)), end(t1)),
  marks);
}

function latencySection(points, ctx) {
  if (!points.length) return emptyState("No seat yet", "Its answer times appear here once it sits in a panel.");
  const box = h("div", { class: "chart" });
  let drawn = 0;
  const draw = () => {
    const width = box.clientWidth;
    if (width && Math.abs(width - drawn) > 4) {
      drawn = width;
      replace(box, latencyChart(points, width));
    }
  };
  const resize = new ResizeObserver(draw);
  resize.observe(box);
  ctx.onCleanup(() => resize.disconnect());
  const ok = points.filter((p) => p[2] === "ok" || p[2] === "tool_calls").map((p) => p[1]).sort((a, b) => a - b);
  const failed = points.length - ok.length;
  return h("div", { class: "stack" },
    h("p", { class: "muted", "data-testid": "latency-summary" },
      `Its last ${fmt.plural(points.length, "seat")}: median ${fmt.answerTime(quantile(ok, 0.5))}, `
      + `p95 ${fmt.answerTime(quantile(ok, 0.95))}; ${fmt.count(failed)} did not answer.`),
    box,
    h("p", { class: "legend" }, h("span", null, "● answered"), h("span", null, "✕ failed")));
}

function shapesTable(rows) {
  if (!rows.length) return emptyState("No evidence yet", "Once it sits in panels, its seats, answers and verdicts per shape show here.");
  return table("Evidence per shape", [["Shape"], ["Seats", true], ["Answered", true], ["Useful rate"], ["p50", true], ["p95", true], ["Failures"]],
    rows.map((r) => h("tr", { dataset: { shape: r.shape } },
      h("th", { scope: "row", text: r.shape }),
      h("td", { class: "numeric", text: fmt.count(r.seats) }),
      h("td", { class: "numeric", text: fmt.count(r.ok) }),
      h("td", null, rateCell(r.rate, r.interval, r.useful, r.not_useful)),
      h("td", { class: "numeric", text: fmt.answerTime(r.p50) }),
      h("td", { class: "numeric", text: fmt.answerTime(r.p95) }),
      h("td", { text: failuresText(r.failures) }))));
}

function seatOf(panel, alias) {
  return [...(panel.seats || []), panel.merger].find((x) => x && x.alias === alias) || null;
}

function panelsTable(panels, alias) {
  if (!panels.length) return emptyState("No panel yet", "It has not sat in a panel.");
  return table("Its newest panels", [["Panel"], ["When"], ["Collection"], ["Its seat"], ["Time", true], [""]],
    panels.map((p) => {
      const seat = seatOf(p, alias);
      return h("tr", { dataset: { panel: p.panel } },
        h("td", { class: "mono", text: p.panel }),
        h("td", null, timeAgo(p.started)),
        h("td", { text: p.collection || fmt.DASH }),
        h("td", null, seat ? h("span", { class: ["chip", `status-${seat.status}`] }, seat.status) : fmt.DASH),
        h("td", { class: "numeric", text: seat ? fmt.answerTime(seat.seconds) : fmt.DASH }),
        h("td", { class: "actions" }, seat ? button("Open", () => openSeatLater(seat.call, { title: `${p.panel} · ${alias}` }), { small: true, "aria-label": `Open ${seat.call}` }) : null));
    }));
}

function failuresTable(rows, alias) {
  if (!rows.length) return h("p", { class: "muted" }, "No failed seat among its newest.");
  return table("Its newest failures", [["When"], ["Panel"], ["Kind"], ["What happened"], [""]],
    rows.map((f) => h("tr", { dataset: { call: f.call } },
      h("td", null, timeAgo(f.started)),
      h("td", { class: "mono", text: f.panel }),
      h("td", null, h("span", { class: "badge bad", text: f.kind || f.status })),
      h("td", { class: "reason", text: f.error || fmt.DASH }),
      h("td", { class: "actions" }, button("Open", () => openSeatLater(f.call, { title: `${f.panel} · ${alias}` }), { small: true, "aria-label": `Open ${f.call}` })))));
}

function factsList(facts) {
  const names = Object.keys(facts || {});
  if (!names.length) return h("p", { class: "muted" }, "The catalog knows nothing more about it.");
  const value = (v) => (typeof v === "boolean" ? (v ? "yes" : "no") : v === null || v === undefined ? fmt.DASH : String(v));
  return table("Catalog facts and their sources", [["Fact"], ["Value"], ["Source"], ["Learned"]],
    names.map((name) => {
      const f = facts[name];
      return h("tr", { dataset: { fact: name } },
        h("th", { scope: "row", text: FACT_LABELS[name] || name }),
        h("td", { class: "mono", text: value(f.value) }),
        h("td", null, `${f.source}${f.from && f.from !== "roster" ? ` (${f.from})` : ""}`, f.at ? h("span", { class: "sub" }, timeAgo(f.at)) : null),
        h("td", null, f.learned ? [`${value(f.learned.value)} (${f.learned.from}, `, timeAgo(f.learned.at), ")"] : ""));
    }));
}

function suiteBlock(row) {
  if (!row) return h("p", { class: "muted" }, "Not in the review suite's report yet: run the suite to rate it.");
  const rate = (r) => (r && r.rate !== null && r.rate !== undefined ? `${fmt.percent(r.rate)} (${fmt.interval(r.interval)})` : fmt.DASH);
  const rates = Object.entries(row).filter(([, v]) => v && typeof v === "object" && "rate" in v);
  return h("dl", { class: "facts" },
    h("dt", { text: "Samples" }), h("dd", { text: fmt.count(row.samples) }),
    rates.map(([k, v]) => [h("dt", { text: k.replace(/_/g, " ") }), h("dd", { text: rate(v) })]));
}

function racesBlock(races) {
  if (!races.length) return h("p", { class: "muted" }, "It ran in none of the latest races.");
  return table("Races it ran in", [["Race"], ["Started"], ["Grade"], ["Its runs"], ["Its total", true], ["Verdict"]],
    races.map((r) => h("tr", { dataset: { race: r.race } },
      h("td", null, h("a", { class: "mono", href: `#/races?race=${encodeURIComponent(r.race)}`, text: r.race })),
      h("td", null, timeAgo(r.started, { never: fmt.DASH })),
      h("td", { text: r.grade || fmt.DASH }),
      h("td", { text: r.model ? `${r.model.succeeded} of ${r.model.runs} ok` : fmt.DASH }),
      h("td", { class: "numeric", text: r.model && typeof r.model.total === "number" ? r.model.total.toFixed(1) : fmt.DASH }),
      h("td", null, r.verdict && r.verdict.model ? modelLink(r.verdict.model, { strong: false }) : fmt.DASH))));
}

function alertsBlock(alerts) {
  if (!alerts.length) return h("p", { class: "muted" }, "No alert about it.");
  return h("ul", { class: "alert-list" }, alerts.map((a) => h("li", { dataset: { kind: a.kind } },
    h("span", { class: "muted" }, timeAgo(a.ts), ` · ${a.kind} · `), alertMessage(a, { onItsPage: true }))));
}

function actions(m, reload, signal) {
  const alias = m.alias;
  const act = (path, said) => async (event) => {
    const btn = event.currentTarget;
    btn.disabled = true;
    try {
      await api.post(`/api/models/${seg(alias)}/${path}`, {}, { signal });
      toast(said);
      reload();
    } catch (err) {
      if (err.name !== "AbortError") toast(err.message, { kind: "error" });
      btn.disabled = false;
    }
  };
  const edit = button("Edit", async () => {
    try {
      const eps = await api.get("/api/endpoints", { signal });
      modelDialog(m, eps.data || [], reload);
    } catch (err) {
      if (err.name !== "AbortError") toast(err.message, { kind: "error" });
    }
  }, { "aria-label": `Edit ${alias}` });
  return [
    button("Probe", (ev) => probeModel(m, ev.currentTarget, reload), { kind: "primary", "aria-label": `Probe ${alias}`, title: "One tiny call: does it answer? (logged like any probe)" }),
    m.retired || m.status === "cooling"
      ? button("Restore", act("restore", `${alias} is back in service.`), { "aria-label": `Restore ${alias}`, title: "End its cooldown or retirement" })
      : button("Retire", act("retire", `${alias} is retired: it will not be seated.`), { "aria-label": `Retire ${alias}`, title: "Stop seating it; its evidence stays" }),
    edit,
    linkButton("Its panels", `#/panels?model=${encodeURIComponent(alias)}`),
  ];
}

export async function render(root, ctx) {
  const alias = ctx.path[0] || "";
  let page;
  try {
    page = await api.get(`/api/models/${seg(alias)}`, { signal: ctx.signal });
  } catch (err) {
    if (err.status !== 404) throw err;
    replace(root, emptyState(`No model ${alias} on the roster`, err.message,
      linkButton("Panels it sat in", `#/panels?model=${encodeURIComponent(alias)}`, "primary"),
      linkButton("Endpoints & models", "#/endpoints")));
    return;
  }
  document.title = `${alias} · Panelist`;
  const m = page.model;
  const reload = () => ctx.navigate(`#/models/${seg(alias)}`);
  const served = m.served && m.served !== alias ? `${m.endpoint} · ${m.served}` : m.endpoint;
  const index = page.index || {};
  replace(root,
    pageHead(alias, `Served by ${served}.`, ...actions(m, reload, ctx.signal)),
    index.complete === false ? indexNotice(index) : null,
    h("div", { class: "stats", "data-testid": "model-stats" },
      h("div", { class: "stat" }, h("div", { class: "stat-value" }, modelStatus(m)), h("div", { class: "stat-label", text: "Status" })),
      h("div", { class: "stat" }, h("div", { class: "stat-value", text: fmt.count(m.seats) }), h("div", { class: "stat-label", text: "Seats" })),
      h("div", { class: "stat" }, h("div", { class: "stat-value" }, rateCell(m.rate, m.interval, m.useful, m.not_useful)), h("div", { class: "stat-label", text: "Useful rate (95% interval)" })),
      h("div", { class: "stat" }, h("div", { class: "stat-value" }, timeAgo(m.last_answer)), h("div", { class: "stat-label", text: "Last answer" })),
      h("div", { class: "stat" }, h("div", { class: "stat-value", text: fmt.tokens(m.window) }), h("div", { class: "stat-label", text: "Context window" })),
      h("div", { class: "stat" }, h("div", { class: "stat-value", text: fmt.price(m) }), h("div", { class: "stat-label", text: "Price per million in / out" }))),
    h("p", { class: "meta" },
      h("span", null, "Grade ", h("strong", { text: m.grade || fmt.DASH })),
      h("span", null, "Family ", h("strong", { text: m.family || fmt.DASH })),
      h("span", null, "Collections ", page.collections.length
        ? page.collections.map((c, i) => [i ? ", " : "", h("a", { href: `#/panels?collection=${encodeURIComponent(c)}`, text: c })])
        : h("strong", { text: "none" }))),
    h("section", { class: "section" }, sectionHead("Verdicts and answer times per shape", "Useful rate with its 95% interval; answer-time percentiles of its answered seats."), shapesTable(page.shapes)),
    seriesSection(`model=${encodeURIComponent(alias)}`, ctx),
    h("section", { class: "section" }, sectionHead("Latency", "The answer time of each of its latest seats."), latencySection(page.latency, ctx)),
    h("section", { class: "section" }, sectionHead("Recent failures", "Its newest seats that failed, and how.",
      linkButton("All its failures", `#/panels?model=${encodeURIComponent(alias)}&status=failed`, "small")), failuresTable(page.failures, alias)),
    h("section", { class: "section" }, sectionHead("Recent panels", "The newest panels it sat in.",
      linkButton("All its panels", `#/panels?model=${encodeURIComponent(alias)}`, "small")), panelsTable(page.panels, alias)),
    h("section", { class: "section" }, sectionHead("Catalog facts", "What is known of it and where each fact came from: typed facts win."), factsList(page.facts)),
    h("section", { class: "section" }, sectionHead("Review suite", null), suiteBlock(page.suite)),
    h("section", { class: "section" }, sectionHead("Races", null), racesBlock(page.races)),
    h("section", { class: "section" }, sectionHead("Alerts", null), alertsBlock(page.alerts)));
}
