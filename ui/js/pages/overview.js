// Overview: every model on the roster with its status and evidence, readable at 500 models;
// over a chosen window (the last hour, day or week: #/overview?window=hour), each model's
// seats, error rate, answer times and spend, from GET /api/usage; and the grades (weakest
// first) with the model each is pinned to, editable there (grades.js).
// With no endpoint yet it is the first-run page instead: three steps and two buttons.

import { api, query } from "../api.js";
import { h, replace } from "../dom.js";
import * as fmt from "../format.js";
import { dataTable } from "../table.js";
import { gradesSection } from "../grades.js";
import { failedSeats, modelPanels, OWED, WINDOW_SPAN } from "../signals.js";
import { seriesSection } from "../series.js";
import { spendSection } from "../spend.js";
import { button, emptyState, linkButton, modelHref, modelLink, modelStatus, notice, pageHead, rateCell, sectionHead, timeAgo, toast } from "../ui.js";

export const title = "Overview";

function stat(label, value, { attention = false, href = null } = {}) {
  const inner = [h("div", { class: "stat-value", text: value }), h("div", { class: "stat-label", text: label })];
  return href
    ? h("a", { class: ["stat", attention && "attention"], href }, inner)
    : h("div", { class: ["stat", attention && "attention"] }, inner);
}

export function firstRun(root, ctx) {
  const demoButton = button("Load the demo roster", async () => {
    demoButton.disabled = true;
    demoButton.textContent = "Loading the demo…";
    try {
      const result = await api.post("/api/demo", {}, { signal: ctx.signal });
      toast(`Demo roster loaded: five simulated models and the collection ${result.collection || "bench/demo"}.`);
      ctx.navigate("#/overview");
    } catch (err) {
      demoButton.disabled = false;
      demoButton.textContent = "Load the demo roster";
      replace(failure, h("div", { class: "notice error", role: "alert" },
        h("p", { class: "grow", text: `The demo could not be loaded: ${err.message}` })));
    }
  }, { kind: "large" });
  const failure = h("div", { "aria-live": "polite" });
  replace(root, h("section", { class: "welcome" },
    h("h1", { text: "Welcome to Panelist" }),
    h("p", { class: "lede muted" },
      "Panelist asks several models the same question at once and keeps every answer, so you "
      + "can judge which models help. Nothing is set up yet; three steps get you there."),
    h("ol", { class: "steps" },
      h("li", null, h("div", null, h("h3", { text: "Add an endpoint" }),
        h("p", { text: "Where your models are served: a local runtime such as Ollama, or a provider's "
          + "OpenAI-compatible URL. Panelist tests it before saving." }))),
      h("li", null, h("div", null, h("h3", { text: "Add its models" }),
        h("p", { text: "Panelist lists what the endpoint serves; add each model with one click." }))),
      h("li", null, h("div", null, h("h3", { text: "Make a collection and ask it" }),
        h("p", { text: "A collection is a named panel of models, such as \"reviewers\". Ask it on the "
          + "Ask page, or from any OpenAI client as the model bench/<name>." })))),
    h("div", { class: "welcome-actions" },
      linkButton("Add an endpoint", "#/endpoints?add=1", "primary large"),
      demoButton),
    h("p", { class: "muted small" },
      "The demo roster is five simulated models on this machine: no account, no internet, answers are canned."),
    failure));
}

// the catalog's facts fill only what the roster leaves unset (the server sends them as `known`)
const abilities = (m) => ["vision", "tools"].filter((t) => m[t] || (m.known || {})[t]);

// a rate from one verdict must not outrank one from fifty: sorted by what its 95% interval
// vouches for at least, and the header says so
const USEFUL_SORT = "Sorted by the low end of its 95% interval: a rate from few verdicts ranks below a steady one";
const usefulLow = (m) => ((m.useful || 0) + (m.not_useful || 0) && Array.isArray(m.interval) ? m.interval[0] : null);

const COLUMNS = [
  { key: "alias", label: "Model", value: (m) => m.alias, search: (m) => `${m.alias} ${m.endpoint} ${m.served}`,
    cell: (m) => [modelLink(m.alias),
      h("span", { class: "sub", title: `${m.endpoint}: ${m.served}` }, m.served && m.served !== m.alias ? `${m.endpoint} · ${m.served}` : m.endpoint)] },
  { key: "family", label: "Family" },
  { key: "grade", label: "Grade" },
  { key: "status", label: "Status", value: (m) => m.status, cell: modelStatus },
  { key: "window", label: "Context", numeric: true, value: (m) => m.window ?? m.context ?? null,
    cell: (m) => fmt.tokens(m.window ?? m.context) },
  { key: "abilities", label: "Abilities", filter: true, className: "nowrap",
    value: (m) => abilities(m).join(" "),
    cell: (m) => {
      const marks = abilities(m);
      return marks.length ? h("span", { class: "tags" }, marks.map((t) => h("span", { class: "badge", text: t }))) : null;
    } },
  { key: "price", label: "Price", value: fmt.priceSum, cell: (m) => fmt.price(m), numeric: true, className: "nowrap" },
  { key: "seats", label: "Seats", numeric: true, cell: (m) => fmt.count(m.seats) },
  { key: "rate", label: "Useful", numeric: false, value: usefulLow, title: USEFUL_SORT, firstSort: "desc",
    cell: (m) => rateCell(m.rate, m.interval, m.useful, m.not_useful), filter: false },
  { key: "last_answer", label: "Last answer", value: (m) => m.last_answer,
    cell: (m) => timeAgo(m.last_answer),
    filter: false },
];

// ------------------------------------------------------------------ the recent window
const WINDOWS = [["hour", "Last hour"], ["day", "Last 24 hours"], ["week", "Last 7 days"]];
const DEFAULT_WINDOW = "day";

function spendCell(r) {
  if (!r.spend) return h("span", { class: "faint", title: "No price on the roster or in the catalog: the cost is unknown" }, "no price");
  const note = r.uncounted ? ` (+ ${fmt.plural(r.uncounted, "answer")} without token counts)` : "";
  return h("span", { title: `${r.prompt_tokens} prompt and ${r.completion_tokens} completion tokens${note}` },
    fmt.money(r.spend.amount, r.spend.currency), r.uncounted ? h("span", { class: "faint" }, " +?") : null);
}

// a row's failed seats in the window are a link to them on Panels
function errorCell(r, span) {
  if (r.error_rate === null) return h("span", { class: "faint" }, "no answer yet");
  const props = { class: r.failed ? "text-bad" : null, title: `${r.failed} failed, ${r.answered} answered` };
  const inner = [fmt.percent(r.error_rate), h("span", { class: "sub" }, `${fmt.count(r.failed)} of ${fmt.count(r.failed + r.answered)}`)];
  return r.failed
    ? h("a", { ...props, href: failedSeats(r.alias, span), "data-testid": "activity-failed" }, inner)
    : h("span", props, inner);
}

// each row leads to that model's panels in the window, its failures to its failed seats there
const usageColumns = (span) => [
  { key: "alias", label: "Model", cell: (r) => h("span", { class: "row" },
    h("strong", null, h("a", { href: modelPanels(r.alias, span), "data-testid": "activity-link" }, r.alias)),
    r.status === "failing" ? h("span", { class: "badge bad", text: "failing" }) : null) },
  { key: "seats", label: "Seats", numeric: true, cell: (r) => fmt.count(r.seats) },
  { key: "error_rate", label: "Error rate", numeric: true, value: (r) => r.error_rate, cell: (r) => errorCell(r, span), filter: false },
  { key: "p50", label: "Answer p50", numeric: true, cell: (r) => fmt.answerTime(r.p50), filter: false },
  { key: "p95", label: "Answer p95", numeric: true, cell: (r) => fmt.answerTime(r.p95), filter: false },
  { key: "spend", label: "Spend", numeric: true, value: (r) => (r.spend ? r.spend.amount : null), cell: spendCell, filter: false, className: "nowrap" },
];

// one tile per currency: amounts in two currencies are never added
function spendStats(total) {
  const spent = Object.entries(total.spend || {});
  if (!spent.length) return [stat("spend", fmt.DASH)];
  return spent.map(([cur, amount]) => stat(`spend in ${cur}`, fmt.money(amount, cur)));
}

/** The window's section: its picker, totals and one row per model with a seat in it. */
function usageSection(usage, models) {
  const status = new Map(models.map((m) => [m.alias, m.status]));
  const rows = (usage.data || []).map((r) => ({ ...r, status: status.get(r.alias) }));
  const total = usage.total || {};
  const picker = h("div", { class: "row", role: "group", "aria-label": "Window" },
    WINDOWS.map(([value, label]) => linkButton(label, `#/overview${query({ window: value })}`,
      value === usage.window ? "small primary" : "small")));
  for (const a of picker.querySelectorAll("a")) {
    if (a.classList.contains("primary")) a.setAttribute("aria-current", "true");
  }
  const unpriced = (total.unpriced || []).length;
  const span = WINDOW_SPAN[usage.window] || "";
  const table = dataTable({
    columns: usageColumns(span), rows, label: "Seats per model in the window", short: true,
    sort: { key: "seats", dir: "desc" }, filterHint: "Filter by model",
    empty: "No seat in this window.", rowId: (r) => r.alias,
  });
  return h("section", { class: "section", id: "usage", "data-window": usage.window },
    sectionHead("Recent activity", `Since ${fmt.when(usage.since)}: each model's seats, how often they failed, how long answers took and what they cost, at each model's price now.`, picker),
    h("div", { class: "stats" },
      stat("seats", fmt.count(total.seats), { href: total.seats ? modelPanels("", span) : null }),
      stat("error rate", fmt.percent(total.error_rate), { attention: total.failed > 0,
        href: total.failed > 0 ? failedSeats("", span) : null }),
      spendStats(total),
      unpriced ? stat("models without a price", fmt.count(unpriced)) : null),
    rows.length ? table.el : emptyState("No seat in this window", "Pick a longer window, or ask a collection.",
      linkButton("Ask a collection", "#/ask", "primary")));
}

// The first run's steps go on past the first endpoint: until a collection has been asked,
// the overview says which step is next, with its button.
function nextStep(c) {
  if (!c.models) return null;   // the models section says how to add them
  if (!c.collections) {
    return notice("", "Next: make a collection", "A collection is a named panel of models, such as \"reviewers\": pick two to four of yours.",
      linkButton("Make a collection", "#/collections?new=1", "primary small"));
  }
  if (!c.panels) {
    return notice("", "Next: ask your collection", "Ask it one question on the Ask page and compare the answers side by side.",
      linkButton("Ask a collection", "#/ask", "primary small"));
  }
  return null;
}

export async function render(root, ctx) {
  const window = WINDOWS.some(([w]) => w === ctx.params.get("window")) ? ctx.params.get("window") : DEFAULT_WINDOW;
  const [info, models, grades, usage, budgets] = await Promise.all([
    ctx.info(), api.get("/api/models", { signal: ctx.signal }), api.get("/api/grades", { signal: ctx.signal }),
    api.get(`/api/usage${query({ window })}`, { signal: ctx.signal }), api.get("/api/budgets", { signal: ctx.signal })]);
  if (info.first_run) {
    firstRun(root, ctx);
    return;
  }
  const c = info.counts || {};
  const rows = models.data || [];
  const answering = rows.filter((m) => m.status === "answering").length;
  const cooling = rows.filter((m) => m.status === "cooling").length;
  const failing = rows.filter((m) => m.status === "failing");
  const failingNow = failing.length;
  // one failing model: its failed seats (its page when a probe is what failed: probes are no
  // panels); several: every failed panel of the last day
  const one = failingNow === 1 ? failing[0] : null;
  const failingHref = !failingNow ? null : one && one.failing && one.failing.probe ? modelHref(one.alias)
    : failedSeats(one ? one.alias : "", "24h");
  const table = dataTable({
    columns: COLUMNS, rows, label: "Models on the roster",
    filterHint: "Filter by model, endpoint, family, grade, status…",
    sort: { key: "alias", dir: "asc" },
    empty: "No model yet. Add models on Endpoints & models.",
    rowId: (m) => m.alias,
  });
  replace(root,
    pageHead("Overview", "Every model on the roster: whether it answers, what it costs, how often its "
      + "answers were useful. Click a column to sort it.",
    linkButton("Ask a collection", "#/ask", "primary")),
    h("div", { "data-testid": "next-step" }, nextStep(c)),
    h("div", { class: "stats" },
      stat("models", fmt.count(c.models), { href: "#/endpoints" }),
      stat("answering now", fmt.count(answering)),
      stat("cooling down", fmt.count(cooling), { attention: cooling > 0 }),
      stat("failing now", fmt.count(failingNow), { attention: failingNow > 0, href: failingHref }),
      stat("collections", fmt.count(c.collections), { href: "#/collections" }),
      stat("panels asked", fmt.count(c.panels), { href: "#/panels" }),
      stat("verdicts owed", fmt.count(c.owed), { attention: c.owed > 0, href: OWED })),
    usageSection(usage, rows),
    spendSection(budgets),
    seriesSection("all=1", ctx, { title: "The gateway over time", window, lede: "Every seat: error rate, then answer times (p50 and p95 of answered seats), per time bucket." }),
    h("section", { class: "section" },
      sectionHead("Models", "Each model's status and evidence over all time."),
      rows.length ? table.el : emptyState("No model on the roster yet",
        "Endpoints are set up, but no model is added. Find what an endpoint serves and add it in one click.",
        linkButton("Endpoints & models", "#/endpoints", "primary"))),
    gradesSection(grades, ctx));
}
