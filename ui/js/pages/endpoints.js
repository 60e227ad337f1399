// Endpoints & models: add an endpoint (Test must pass before Save), list what an endpoint
// serves and add a model in one click, edit a model's facts, retire or restore it.

import { api, seg } from "../api.js";
import { connectDialog } from "../connect.js";
import { h, replace } from "../dom.js";
import * as fmt from "../format.js";
import { moreMenu } from "../rowmenu.js";
import { dataTable } from "../table.js";
import {
  button, checkbox, clearFieldErrors, confirmAction, emptyState, field, input, linkButton, modelLink, modelStatus, notice,
  numberOrNull, openDialog, pageHead, saveForm, sectionHead, select, showError, showFieldError, timeAgo, toast,
} from "../ui.js";

export const title = "Endpoints & models";

const ALIAS_BAD = /[^A-Za-z0-9._:/-]+/g;

/** A roster alias for a served id: the id itself where it is a valid alias. */
export function aliasFor(served) {
  let a = served.replace(ALIAS_BAD, "-").replace(/^[^A-Za-z0-9]+/, "").slice(0, 96);
  if (a.startsWith("bench/")) a = a.slice(6);
  return a || "model";
}

function testLine(result) {
  if (result.ok) {
    const listed = Array.isArray(result.models) ? ` It lists ${fmt.plural(result.models.length, "model")}.` : "";
    return notice("ok", `Answered${result.status ? ` ${result.status}` : ""} in ${fmt.answerTime(result.seconds)}.`,
      `The endpoint works; save it to use it.${listed}`);
  }
  // no status: nothing answered (a refused connection, a name that does not resolve), so how
  // long it took says nothing unless the wait ran out
  const title = result.status
    ? `Test failed (${result.status}) after ${fmt.answerTime(result.seconds)}`
    : result.seconds >= 1 ? `Test failed: no answer within ${fmt.seconds(result.seconds)}` : "Test failed: no answer";
  return notice("error", title, fmt.sentence(result.error || "The endpoint did not answer."));
}

// ------------------------------------------------------------------ add an endpoint
function addEndpointForm(onSaved, onCancel) {
  const name = input({ name: "name", required: true, maxlength: 48, placeholder: "ollama" });
  const base = input({ name: "base_url", type: "url", required: true, placeholder: "http://127.0.0.1:11434/v1" });
  const keyEnv = input({ name: "key_env", placeholder: "PANELIST_KEY_<NAME>" });
  const result = h("div", { "aria-live": "polite" });
  const test = button("Test", null, { type: "submit" });
  const save = button("Save endpoint", null, { kind: "primary", disabled: true });
  let passed = null; // the fields that passed the test

  const fields = () => ({ name: name.value.trim(), base_url: base.value.trim(), key_env: keyEnv.value.trim() });
  const same = (a, b) => a && b && a.name === b.name && a.base_url === b.base_url && a.key_env === b.key_env;
  for (const el of [name, base, keyEnv]) {
    el.addEventListener("input", () => {
      save.disabled = !same(passed, fields());
      if (save.disabled && passed) replace(result, notice("", "Changed since the test: test again before saving."));
    });
  }
  const showDefault = () => { keyEnv.placeholder = name.value.trim() ? `PANELIST_KEY_${name.value.trim().toUpperCase().replace(/[^A-Z0-9]/g, "_")}` : "PANELIST_KEY_<NAME>"; };
  name.addEventListener("input", showDefault);

  const form = h("form", { class: "card form", novalidate: true, "aria-label": "Add an endpoint" },
    h("h3", { text: "Add an endpoint" }),
    h("div", { class: "form-grid" },
      field("Name", name, { hint: "Short, lower-case: ollama, cloud." }),
      field("Base URL", base, { hint: "The OpenAI-compatible base, usually ending in /v1." }),
      field("Key variable", keyEnv, { hint: "The environment variable holding its API key, read at call time; the key is never stored. Leave blank for the default; unset means no key." })),
    result,
    h("div", { class: "form-actions" },
      h("span", { class: "status muted small" }, "Test makes one real call; Save is enabled once it passes."),
      onCancel ? button("Cancel", onCancel) : null, test, save));

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const f = fields();
    if (!f.base_url) { clearFieldErrors(form); replace(result); showFieldError(form, { param: "base_url", message: "Type the endpoint's base URL first." }); return; }
    test.disabled = true;
    save.disabled = true;
    clearFieldErrors(form);
    replace(result, h("p", { class: "muted" }, "Testing…"));
    try {
      const r = await api.post("/api/endpoints/test", { base_url: f.base_url, ...(f.key_env ? { key_env: f.key_env } : {}) });
      replace(result, testLine(r));
      passed = r.ok ? f : null;
      save.disabled = !(r.ok && f.name);
      if (r.ok && !f.name) result.append(notice("", "Give it a name to save it."));
    } catch (err) {
      clearFieldErrors(form);
      replace(result, notice("error", "Test could not run",
        showFieldError(form, err) ? "Fix the marked field and test again." : err.message));
    } finally {
      test.disabled = false;
    }
  });
  save.addEventListener("click", async () => {
    const f = fields();
    if (!same(passed, f)) return;
    save.disabled = true;
    try {
      const body = { name: f.name, base_url: f.base_url, tested: true };
      if (f.key_env) body.key_env = f.key_env;
      const ep = await api.post("/api/endpoints", body);
      toast(`Saved endpoint ${ep.name || f.name}.`);
      onSaved(ep.name || f.name);
    } catch (err) {
      save.disabled = false;
      showError(result, err);
    }
  });
  return { el: form, focus: () => name.focus() };
}

// ------------------------------------------------------------------ discover
function discoverPanel(endpoint, onAdded) {
  const body = h("div", { class: "stack" }, h("p", { class: "muted" }, `Asking ${endpoint} what it serves…`));
  const card = h("section", { class: "card", "aria-label": `Models served by ${endpoint}`, dataset: { discover: endpoint } },
    h("div", { class: "card-head" }, h("h3", { text: `What ${endpoint} serves` })), body);
  api.get(`/api/endpoints/${seg(endpoint)}/discover`).then((r) => {
    const rows = r.data || [];
    const missing = rows.filter((x) => !x.on_roster);
    if (!rows.length) { replace(body, h("p", { class: "muted" }, "It lists no model.")); return; }
    // once a model is in, the next step of the first run: a collection to ask
    const next = h("div");
    const showNext = () => {
      if (next.firstChild) return;
      replace(next, notice("ok", "Next: make a collection of them",
        "A collection is a named panel of models; ask it on the Ask page, or from any OpenAI client.",
        linkButton("Make a collection", "#/collections?new=1", "primary small")));
    };
    // one summary for the lot: a toast per model would bury the page
    const addAll = missing.length > 1 ? button(`Add all ${missing.length}`, async () => {
      addAll.disabled = true;
      let added = 0;
      let failed = 0;
      for (const b of body.querySelectorAll("button[data-add]")) {
        if (b.disabled) continue;
        if (await b.__add({ quiet: true })) added += 1; else failed += 1;
      }
      if (added) { onAdded(); showNext(); }
      toast(failed
        ? `Added ${fmt.plural(added, "model")} from ${endpoint}; ${fmt.count(failed)} could not be added (the reason is in its row).`
        : `Added ${fmt.plural(added, "model")} from ${endpoint}, with what it reports of each (window, vision, price).`,
      { kind: failed ? "error" : "", timeout: failed ? 12000 : 6000 });
      addAll.disabled = failed === 0;
    }, { small: true }) : null;
    // the count follows each add, one by one or all at once
    let notYet = missing.length;
    const summary = h("p", { class: "muted small", "data-testid": "listed-summary" });
    const sayLeft = () => {
      summary.textContent = `${fmt.plural(rows.length, "model")} listed, `
        + (notYet ? `${fmt.count(notYet)} not on the roster yet.` : "all on the roster.");
      if (addAll && !notYet) addAll.remove();
    };
    sayLeft();
    replace(body,
      h("div", { class: "row spread" }, summary, addAll),
      h("div", { class: "table-wrap short" }, h("table", null,
        h("thead", null, h("tr", null, h("th", { scope: "col" }, "Served id"), h("th", { scope: "col" }, "Roster alias"), h("th", { scope: "col", class: "numeric" }, ""))),
        h("tbody", null, rows.map((x) => {
          const alias = aliasFor(x.served);
          const cell = h("td", { class: "actions" });
          const add = button("Add", () => add.__add(), { small: true, kind: "primary", "aria-label": `Add ${x.served}`, "data-add": "" });
          // added as Discover adds it, so the window, vision and price the endpoint reports
          // come along into the catalog
          add.__add = async ({ quiet = false } = {}) => {
            add.disabled = true;
            try {
              const done = await api.post("/api/discover/add", { endpoint, served: x.served });
              const as = done.added && done.added[0] ? done.added[0].alias : alias;
              replace(cell, h("span", { class: "badge ok" }, "added"));
              notYet -= 1;
              sayLeft();
              if (!quiet) {
                toast(`Added ${as} to the roster.`);
                onAdded();
                showNext();
              }
              return true;
            } catch (err) {
              add.disabled = false;
              replace(cell, add, h("span", { class: "sub text-bad", text: err.message }));
              return false;
            }
          };
          replace(cell, x.on_roster ? h("span", { class: "badge" }, "on the roster") : add);
          return h("tr", null, h("td", { class: "mono", text: x.served }), h("td", { class: "mono muted", text: x.on_roster ? "" : alias }), cell);
        })))),
      next);
  }, (err) => replace(body, notice("error", `Could not list ${endpoint}'s models`, err.message)));
  return card;
}

// ------------------------------------------------------------------ a model's facts
const FACT_LABELS = {
  context: "Context window", max_output: "Max output", vision: "Vision", tools: "Tools",
  structured_output: "Structured output", price_in: "Price in", price_out: "Price out",
  currency: "Currency", rpm: "Calls per minute", max_concurrent: "Calls at once",
  retry_after: "Retry-After (s)",
};

function factValue(v) {
  if (typeof v === "boolean") return v ? "yes" : "no";
  return typeof v === "number" ? String(+v.toFixed(6)) : String(v);
}

function factSource(f) {
  return `${f.source}${f.from && f.from !== "roster" ? ` (${f.from})` : ""}`;
}

/** What the catalog knows of a model: each fact, its source and date; a learned one beside. */
function catalogFacts(facts) {
  const names = Object.keys(facts || {});
  if (!names.length) return notice("", "The catalog knows nothing more about this model",
    "Fill it with Refresh catalog or Import a catalog file, both on Discover.");
  return h("div", { class: "table-wrap", role: "region", "aria-label": "What the catalog knows", tabindex: "0" },
    h("table", null,
      h("caption", { text: "What the catalog knows (typed facts win; blank fields above use these)" }),
      h("thead", null, h("tr", null, ["Fact", "Value", "Source", "Learned"].map((t) => h("th", { scope: "col", text: t })))),
      h("tbody", null, names.map((name) => {
        const f = facts[name];
        const learned = f.source === "learned" ? null : f.learned;
        return h("tr", { dataset: { fact: name } },
          h("th", { scope: "row", text: FACT_LABELS[name] || name }),
          h("td", { class: "mono", text: factValue(f.value) }),
          h("td", null, factSource(f), f.at ? h("span", { class: "sub" }, timeAgo(f.at)) : null),
          h("td", null, learned ? [`${factValue(learned.value)} (${learned.from}, `, timeAgo(learned.at), ")"] : ""));
      }))));
}

/** What one probe said, in words: the time it took, or its failure and what health did. */
export function probeSaid(p) {
  const acted = p.action === "retired" ? " It is retired now." : p.action === "restored" ? " It is back in service." : "";
  return p.status === "ok"
    ? `${p.alias} answered in ${fmt.answerTime(p.seconds)}.${acted}`
    : `${p.alias} did not answer: ${p.error_kind || p.status}${p.error ? ` (${p.error})` : ""}.${acted}`;
}

export async function probeModel(m, btn, reload) {
  btn.disabled = true;
  try {
    const done = await api.post(`/api/models/${seg(m.alias)}/probe`, {});
    toast(probeSaid(done.probe), { kind: done.probe.status === "ok" ? "" : "error", timeout: 9000 });
    reload();
  } catch (err) {
    toast(err.message, { kind: "error" });
    btn.disabled = false;
  }
}

export function modelDialog(model, endpoints, done) {
  const editing = Boolean(model);
  const m = model || { alias: "", endpoint: endpoints[0] ? endpoints[0].name : "", served: "", family: "", grade: "",
    context: null, max_output: null, vision: false, tools: false, price_in: null, price_out: null, currency: "USD" };
  openDialog({ title: editing ? `Edit ${m.alias}` : "Add a model", sub: editing ? "The facts the gateway seats it by." : null, wide: true }, ({ close }) => {
    const alias = input({ name: "alias", value: m.alias, disabled: editing, maxlength: 96 });
    const endpoint = select(endpoints.map((e) => [e.name, e.name]), m.endpoint);
    const served = input({ name: "served", value: m.served || "", placeholder: "the id the endpoint knows (default: the alias)" });
    const family = input({ name: "family", value: m.family || "", placeholder: "default: the line its id names (gpt-4o-mini: gpt)" });
    const gradeList = h("datalist", { id: "grade-options" }, ["light", "general", "strong"].map((g) => h("option", { value: g })));
    const grade = input({ name: "grade", value: m.grade || "", list: "grade-options" });
    const context = input({ name: "context", type: "number", min: 1, step: 1, value: m.context ?? "", inputmode: "numeric" });
    const maxOut = input({ name: "max_output", type: "number", min: 1, step: 1, value: m.max_output ?? "", inputmode: "numeric" });
    const priceIn = input({ name: "price_in", type: "number", min: 0, step: "any", value: m.price_in ?? "", inputmode: "decimal" });
    const priceOut = input({ name: "price_out", type: "number", min: 0, step: "any", value: m.price_out ?? "", inputmode: "decimal" });
    const currency = input({ name: "currency", value: m.currency || "USD", maxlength: 3 });
    const vision = checkbox("Takes images (vision)", { checked: m.vision });
    const tools = checkbox("Calls tools", { checked: m.tools });
    const status = h("div");
    const known = h("div");
    const save = button(editing ? "Save changes" : "Add model", null, { kind: "primary", type: "submit" });
    const form = h("form", { class: "form", novalidate: true },
      h("div", { class: "form-grid" },
        field("Alias", alias, { hint: editing ? "Aliases cannot change." : "How collections and callers name it." }),
        field("Endpoint", endpoint),
        field("Served id", served),
        field("Family", family, { hint: "Explorers are never of a member's family." }),
        field("Grade", grade, { hint: "A quality tier: light, general, strong." }),
        field("Context window (tokens)", context, { hint: "Blank: unknown, never refused." }),
        field("Max output (tokens)", maxOut),
        field("Price in (per million tokens)", priceIn),
        field("Price out (per million tokens)", priceOut),
        field("Currency", currency)),
      h("div", { class: "choices" }, vision.el, tools.el),
      gradeList, known, status,
      h("div", { class: "form-actions" }, button("Cancel", close), save));
    if (editing) {
      api.get(`/api/models/${seg(m.alias)}/catalog`).then(
        (doc) => replace(known, catalogFacts(doc.facts)),
        (err) => replace(known, notice("error", "The catalog could not be read", err.message)));
    }
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const body = {
        alias: alias.value.trim(), endpoint: endpoint.value, served: served.value.trim() || null,
        family: family.value.trim() || null, grade: grade.value.trim(), context: numberOrNull(context.value),
        max_output: numberOrNull(maxOut.value), vision: vision.box.checked, tools: tools.box.checked,
        price_in: numberOrNull(priceIn.value), price_out: numberOrNull(priceOut.value),
        currency: currency.value.trim().toUpperCase() || "USD",
      };
      clearFieldErrors(form);
      if (!body.alias) { showFieldError(form, { param: "alias", message: "Give the model an alias." }); return; }
      await saveForm({
        save, status, close, done,
        send: () => (editing
          ? api.put(`/api/models/${seg(m.alias)}`, { ...body, version: m.version })
          : api.post("/api/models", body)),
        said: editing ? `Saved ${body.alias}.` : `Added ${body.alias}.`,
      });
    });
    return { body: form };
  });
}

// ------------------------------------------------------------------ the page
export async function render(root, ctx, { initial = true } = {}) {
  if (ctx.path[0]) return (await import("./endpoint.js")).render(root, ctx);   // #/endpoints/NAME
  const [eps, models] = await Promise.all([
    api.get("/api/endpoints", { signal: ctx.signal }),
    api.get("/api/models", { signal: ctx.signal }),
  ]);
  const endpoints = eps.data || [];
  const rows = models.data || [];
  const reload = () => render(root, ctx, { initial: false }).catch((err) => toast(err.message, { kind: "error" }));
  const discoverSlot = h("div", { class: "stack" });
  const formSlot = h("div");

  const showAdd = () => {
    const form = addEndpointForm((name) => {
      reload().then(() => {
        const slot = root.querySelector("#discover-slot");
        if (slot) replace(slot, discoverPanel(name, slot.__refresh));
      });
    }, endpoints.length ? () => replace(formSlot) : null);
    replace(formSlot, form.el);
    form.focus();
  };

  const endpointRows = endpoints.map((e) => h("tr", { dataset: { endpoint: e.name } },
    h("td", null, h("a", { href: `#/endpoints/${encodeURIComponent(e.name)}`, title: `Endpoint ${e.name}: its health, limits and models` }, h("strong", { text: e.name }))),
    h("td", { class: "mono", text: e.base_url }),
    h("td", null, h("span", { class: "mono", text: e.key_env }), " ",
      e.key_refused
        ? h("span", { class: ["badge", "bad"], title: e.key_refused }, "not read")
        : h("span", { class: ["badge", e.key_set ? "ok" : "outline"] }, e.key_set ? "set" : "not set")),
    h("td", { class: "numeric", text: fmt.count((e.models || []).length) }),
    h("td", { class: "actions" },
      button("Find models", () => replace(discoverSlot, discoverPanel(e.name, refreshModels)), { small: true, "aria-label": `Find models on ${e.name}` }),
      button("Remove", async () => {
        // an endpoint with models cannot go: say which ones to remove, with no button that
        // would only be refused
        if ((e.models || []).length) {
          openDialog({ title: `Endpoint ${e.name} still has models` }, ({ close }) => ({
            body: h("div", { class: "stack" },
              h("p", { text: `Remove its ${fmt.plural(e.models.length, "model")} from the roster first (each model's Remove, below), then remove the endpoint.` }),
              h("ul", { class: "tags" }, e.models.map((alias) => h("li", null, modelLink(alias, { strong: false, class: "chip model-link" }))))),
            foot: [button("Close", close, { kind: "primary" })],
          }));
          return;
        }
        if (!await confirmAction(`Remove endpoint ${e.name}?`, "It serves no model on the roster.", "Remove")) return;
        try {
          await api.del(`/api/endpoints/${seg(e.name)}`);
          toast(`Removed endpoint ${e.name}.`);
          reload();
        } catch (err) {
          toast(err.message, { kind: "error", timeout: 9000 });
        }
      }, { small: true, kind: "danger", "aria-label": `Remove ${e.name}` }))));

  const table = dataTable({
    label: "Models on the roster",
    rows,
    sort: { key: "alias", dir: "asc" },
    filterHint: "Filter models",
    empty: "No model yet: use Find models on an endpoint, or Add a model.",
    rowId: (m) => m.alias,
    columns: [
      { key: "alias", label: "Alias", cell: (m) => modelLink(m.alias) },
      { key: "endpoint", label: "Endpoint" },
      { key: "served", label: "Served id", cell: (m) => h("span", { class: "mono", text: m.served }) },
      { key: "family", label: "Family" },
      { key: "grade", label: "Grade" },
      { key: "context", label: "Context", numeric: true, value: (m) => m.window ?? m.context ?? null, cell: (m) => fmt.tokens(m.window ?? m.context) },
      { key: "price", label: "Price", numeric: true, value: fmt.priceSum, cell: (m) => fmt.price(m) },
      { key: "status", label: "Status", cell: modelStatus },
      // Probe at hand; the rest behind More: two buttons a row on a 500-row table, not four
      { key: "actions", label: "Actions", sortable: false, filter: false, className: "actions", cell: (m) => [
        button("Probe", (ev) => probeModel(m, ev.currentTarget, reload), {
          small: true, "aria-label": `Probe ${m.alias}`, title: "One tiny call: does it answer? (logged like any probe)" }),
        moreMenu(`More for ${m.alias}`, [
          button("Edit", () => modelDialog(m, endpoints, reload), { small: true, "aria-label": `Edit ${m.alias}` }),
          m.retired || m.status === "cooling"
          ? button("Restore", async () => {
            try { await api.post(`/api/models/${seg(m.alias)}/restore`, {}); toast(`${m.alias} is back in service.`); reload(); } catch (err) { toast(err.message, { kind: "error" }); }
          }, { small: true, "aria-label": `Restore ${m.alias}`, title: "End its cooldown or retirement" })
          : button("Retire", async () => {
            try { await api.post(`/api/models/${seg(m.alias)}/retire`, {}); toast(`${m.alias} is retired: it will not be seated.`); reload(); } catch (err) { toast(err.message, { kind: "error" }); }
          }, { small: true, "aria-label": `Retire ${m.alias}`, title: "Stop seating it; its evidence stays" }),
        button("Remove", async () => {
          if (!await confirmAction(`Remove ${m.alias}?`, "It leaves the roster; its panels and verdicts stay in the logs. A collection that uses it must drop it first.", "Remove")) return;
          try { await api.del(`/api/models/${seg(m.alias)}`); toast(`Removed ${m.alias}.`); reload(); } catch (err) { toast(err.message, { kind: "error", timeout: 9000 }); }
        }, { small: true, kind: "danger", "aria-label": `Remove ${m.alias}` }),
        ]),
      ] },
    ],
  });

  // a model added from the discover list refreshes the table and counts, not the whole page,
  // so the list stays open for the next one-click add
  let refreshing = null;
  async function refreshModels() {
    if (refreshing) return refreshing;
    refreshing = (async () => {
      try {
        const [m2, e2] = await Promise.all([api.get("/api/models", { signal: ctx.signal }), api.get("/api/endpoints", { signal: ctx.signal })]);
        table.update(m2.data || []);
        for (const e of e2.data || []) {
          const cell = root.querySelector(`tr[data-endpoint="${CSS.escape(e.name)}"] td.numeric`);
          if (cell) cell.textContent = fmt.count((e.models || []).length);
        }
      } catch (err) {
        if (err.name !== "AbortError") toast(err.message, { kind: "error" });
      } finally {
        refreshing = null;
      }
    })();
    return refreshing;
  }
  discoverSlot.__refresh = refreshModels;
  discoverSlot.id = "discover-slot";
  replace(root,
    pageHead("Endpoints & models", "Endpoints are where models are served; models are what a seat can be. "
      + "Add an endpoint, then add what it serves.",
    button("Add an endpoint", showAdd, { kind: endpoints.length ? "" : "primary" }),
    button("Connect a provider", () => connectDialog(() => reload()), { title: "Sign in to a provider; the key it issues is stored for the endpoint" }),
    button("Add a model", () => modelDialog(null, endpoints, reload), { kind: endpoints.length ? "primary" : "", disabled: !endpoints.length })),
    formSlot,
    h("section", { class: "section" },
      sectionHead("Endpoints", null),
      endpoints.length
        ? h("div", { class: "table-wrap" }, h("table", null,
          h("thead", null, h("tr", null, ["Name", "Base URL", "Key variable", "Models", ""].map((t, i) => h("th", { scope: "col", class: i === 3 ? "numeric" : null }, t)))),
          h("tbody", null, endpointRows)))
        : emptyState("No endpoint yet", "Add where your models are served: a local runtime such as Ollama, or a provider's OpenAI-compatible URL."),
      discoverSlot),
    h("section", { class: "section" },
      sectionHead("Models", "Edit a model's facts; retire one to stop seating it (its evidence stays), restore it to bring it back."),
      table.el));
  if ((initial && ctx.params.get("add") === "1") || !endpoints.length) showAdd();
}
