// Overview: every model on the roster with its status and evidence, readable at 500 models,
// and the grades (weakest first) with the model each is pinned to.
// With no endpoint yet it is the first-run page instead: three steps and two buttons.

import { api } from "../api.js";
import { h, replace } from "../dom.js";
import * as fmt from "../format.js";
import { dataTable } from "../table.js";
import { button, emptyState, linkButton, modelLink, modelStatus, pageHead, rateCell, sectionHead, timeAgo, toast } from "../ui.js";

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
  { key: "rate", label: "Useful", numeric: false, value: (m) => m.rate,
    cell: (m) => rateCell(m.rate, m.interval, m.useful, m.not_useful), filter: false },
  { key: "last_answer", label: "Last answer", value: (m) => m.last_answer,
    cell: (m) => timeAgo(m.last_answer),
    filter: false },
];

// One row per grade, weakest first: its pinned model (and what is wrong with it) and its models.
function gradesSection(grades) {
  const rows = (grades.grades || []).map((g) => h("tr", { "data-grade": g.grade },
    h("td", { class: "numeric" }, String(g.rank)),
    h("th", { scope: "row", text: g.grade }),
    h("td", null, g.pinned
      ? h("span", { class: "row" }, h("strong", { class: "mono", text: g.pinned }),
        g.pinned === grades.ceiling?.alias ? h("span", { class: "badge accent", text: "ceiling" }) : null,
        g.problem ? h("span", { class: "badge warn", text: g.problem }) : null)
      : h("span", { class: "faint", text: "not pinned" })),
    h("td", null, g.models.length ? g.models.join(", ") : h("span", { class: "faint", text: "no model" }))));
  const ceiling = grades.ceiling || {};
  const note = ceiling.alias
    ? `Ceiling (the strongest model, a race's judge): ${ceiling.alias}${ceiling.set ? ", set by hand" : ", the strongest pinned grade's model"}${ceiling.problem ? ` (${ceiling.problem})` : ""}.`
    : "No ceiling yet: pin a model for a grade (panelist grade pin GRADE ALIAS).";
  const unordered = (grades.unordered || []).length
    ? h("p", { class: "muted small", text: `Grades models use that the order leaves out: ${grades.unordered.join(", ")}.` })
    : null;
  return h("section", { class: "section", id: "grades" },
    sectionHead("Grades", "Weakest first, each with the model the deployment uses for it (panelist grade pin)."),
    rows.length
      ? h("div", { class: "table-wrap" }, h("table", null,
        h("thead", null, h("tr", null, ["#", "Grade", "Pinned model", "Models of the grade"].map((t, i) => h("th", { scope: "col", class: i === 0 ? "numeric" : null }, t)))),
        h("tbody", null, rows)))
      : emptyState("No grade yet", "Set the grades, weakest first, with panelist grade order light,general,strong."),
    h("p", { class: "muted small", id: "ceiling", text: note }),
    unordered);
}

export async function render(root, ctx) {
  const [info, models, grades] = await Promise.all([
    ctx.info(), api.get("/api/models", { signal: ctx.signal }), api.get("/api/grades", { signal: ctx.signal })]);
  if (info.first_run) {
    firstRun(root, ctx);
    return;
  }
  const c = info.counts || {};
  const rows = models.data || [];
  const answering = rows.filter((m) => m.status === "answering").length;
  const cooling = rows.filter((m) => m.status === "cooling").length;
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
    h("div", { class: "stats" },
      stat("models", fmt.count(c.models), { href: "#/endpoints" }),
      stat("answering now", fmt.count(answering)),
      stat("cooling down", fmt.count(cooling), { attention: cooling > 0 }),
      stat("collections", fmt.count(c.collections), { href: "#/collections" }),
      stat("panels asked", fmt.count(c.panels), { href: "#/panels" }),
      stat("verdicts owed", fmt.count(c.owed), { attention: c.owed > 0, href: "#/panels" })),
    rows.length ? table.el : emptyState("No model on the roster yet",
      "Endpoints are set up, but no model is added. Find what an endpoint serves and add it in one click.",
      linkButton("Endpoints & models", "#/endpoints", "primary")),
    gradesSection(grades));
}
