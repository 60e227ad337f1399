// Discover: the models each endpoint serves that the roster does not hold yet, free ones first
// (the order `panelist discover` prints), with an Add button that registers one exactly as
// `panelist discover --add` does, and an Onboard button that queues it for register → probe →
// quick suite run → ready (`panelist model onboard`). The onboarding queue is shown above the
// list, read again after every Onboard and then while anything in it is queued or running. A
// refusal shows the server's own message beside the list. Names and ids come from endpoints, so
// they reach the page as text only. Import a catalog file uploads one for the catalog, as
// `panelist catalog import` reads it, and says what it added, changed and kept per model.
//
// What the page shows converges to the server's state whatever order the answers come in: only
// the newest read of the queue (and of the list) is drawn, and the list is read again whenever
// the queue holds a registered entry the shown list was not read after. The worker can take a
// model to ready before the page first looks, so nothing here waits to see an entry under way.

import { api, isAbort } from "../api.js";
import { h, replace } from "../dom.js";
import * as fmt from "../format.js";
import { button, emptyState, modelLink, notice, pageHead, sectionHead, timeAgo, toast } from "../ui.js";

export const title = "Discover";
const REFRESH_MS = 1500;   // how often the queue is read again while an entry is under way

function outcome(entry) {
  if (entry.status === "failed") {
    return `${entry.error_kind}: ${entry.error}` + (entry.hint ? `. What to do: ${entry.hint}` : "");
  }
  const r = entry.result;
  if (!r) return fmt.DASH;
  if (r.suite === "skipped") return "onboarded (no suite tasks to run)";
  const figures = `accuracy ${fmt.percent(r.accuracy)} (${r.right}/${r.scored}), unparseable ${fmt.percent(r.unparseable)}`;
  // it answers, but answered no suite task right: on the roster, not one to trust yet
  return r.scored && !r.right ? `${figures}: no suite answer was right; read its answers before putting it in a collection` : figures;
}

// "ready" is the queue's last step; said of a model that got nothing right it would read as
// a recommendation, so the page says what happened instead
function statusWord(entry) {
  if (entry.status !== "ready") return entry.status;
  const r = entry.result || {};
  return r.suite !== "skipped" && r.scored && !r.right ? "onboarded, 0 right" : "onboarded";
}

function queueRow(entry) {
  const where = entry.step_status && entry.status === "running"
    ? `${entry.step} (${entry.step_status})` : entry.step === "ready" ? "done" : entry.step;
  return h("tr", { dataset: { alias: entry.alias, status: entry.status } },
    h("td", { class: "mono" }, modelLink(entry.alias, { strong: false })),
    h("td", { text: entry.endpoint || fmt.DASH }),
    h("td", { text: where }),
    h("td", { class: statusWord(entry) === "onboarded, 0 right" ? "text-bad" : null, text: statusWord(entry) }),
    h("td", null, timeAgo(entry.updated)),
    h("td", { text: outcome(entry) }));
}

function unfinished(entry) {
  return entry.status === "queued" || entry.status === "running";
}

// Whether an entry's model is registered now (or its entry ended): from then on the list of
// models not on the roster may differ from one read before.
function registered(entry) {
  return !unfinished(entry) || entry.step !== "register" || entry.step_status === "done";
}

function yesNo(v) {
  return v === true ? "yes" : v === false ? "no" : fmt.DASH;
}

function row(model, onAdd, onOnboard) {
  const f = model.facts || {};
  const add = button("Add", () => onAdd(model, add), {
    small: true, kind: "primary", "aria-label": `Add ${model.id} from ${model.endpoint}`,
  });
  const onboard = button("Onboard", () => onOnboard(model, onboard), {
    small: true, "aria-label": `Onboard ${model.id} from ${model.endpoint}`,
  });
  return h("tr", { dataset: { endpoint: model.endpoint, id: model.id } },
    h("td", { text: model.endpoint }),
    h("td", null, h("span", { class: "mono", text: model.id }),
      (model.also_on_roster || []).length
        ? h("span", { class: "sub", text: `also on the roster from another endpoint as ${model.also_on_roster.join(", ")}` })
        : null),
    h("td", { class: "numeric", text: fmt.tokens(f.context) }),
    h("td", { text: fmt.price(f) }),
    h("td", { text: yesNo(f.vision) }),
    h("td", { text: yesNo(f.tools) }),
    h("td", null, h("div", { class: "row" }, add, onboard)));
}

// What an import did to each model the file knows, and the roster models it does not know.
function importReport(done) {
  const matched = done.matched || [];
  const said = (m) => [
    m.added.length ? `added ${m.added.join(", ")}` : null,
    m.changed.length ? `changed ${m.changed.join(", ")}` : null,
    m.kept.length ? `kept as its endpoint states ${m.kept.join(", ")}` : null,
    m.typed.length ? `left as typed on the roster ${m.typed.join(", ")}` : null,
  ].filter(Boolean).join("; ") || "nothing new";
  return h("div", { class: "notice", role: "status", "data-testid": "import-report" },
    h("div", { class: "grow" },
      h("p", { class: "notice-title", text: `Imported ${done.file}: ${fmt.plural(matched.length, "model")} of the roster found in it` }),
      matched.length ? h("ul", null, matched.map((m) => h("li", { dataset: { alias: m.alias } },
        modelLink(m.alias, { strong: false }), `: ${said(m)}`))) : null,
      (done.unmatched || []).length
        ? h("p", { class: "muted small", text: `Not in the file: ${done.unmatched.join(", ")}.` }) : null));
}

// Import a catalog file (the models.dev layout, as `catalog import` reads it): its facts fill
// what the roster leaves unset, never what an endpoint states or a person typed.
function catalogImport(ctx, status) {
  const picker = h("input", { type: "file", accept: ".json,application/json", class: "visually-hidden",
    "aria-label": "Catalog file", "data-testid": "catalog-file", tabindex: "-1" });
  const open = button("Import a catalog file", () => picker.click(), {
    title: "A models.dev-layout JSON file: windows, prices and abilities by model id",
  });
  picker.addEventListener("change", async () => {
    const file = picker.files && picker.files[0];
    if (!file) return;
    open.disabled = true;
    replace(status);
    try {
      const done = await api.post("/api/catalog/import", { name: file.name, text: await file.text() },
        { signal: ctx.signal });
      replace(status, importReport(done));
    } catch (err) {
      if (ctx.active && !isAbort(err)) replace(status, notice("error", `${file.name} was not imported`, err.message));
    } finally {
      open.disabled = false;
      picker.value = "";
    }
  });
  return h("span", { class: "row" }, open, picker);
}

export async function render(main, ctx) {
  const status = h("div", { "data-testid": "discover-status" });
  const queue = h("section", { "aria-label": "Onboarding queue" });
  const body = h("div");
  const refresh = button("Refresh catalog", () => refreshCatalog(), {
    title: "Read every endpoint's model list into the catalog (windows, prices, abilities)",
  });
  const importer = catalogImport(ctx, status);
  replace(main, pageHead("Discover",
    "Models your endpoints serve that are not on the roster yet. Free ones come first.", refresh, importer),
  status, queue, body);

  async function refreshCatalog() {
    refresh.disabled = true;
    replace(status);
    try {
      const done = await api.post("/api/catalog/refresh", {}, { signal: ctx.signal });
      const read = (done.refreshed || []).map((r) => `${r.endpoint}: ${fmt.plural(r.models, "model")}, ${r.with_facts} with facts`);
      toast(`Catalog refreshed. ${read.join("; ")}`, { timeout: 9000 });
      for (const a of done.went_paid || []) toast(a.message, { kind: "error", timeout: 12000 });
      if ((done.failed || []).length) {
        replace(status, notice("error", "Some endpoints could not be read",
          done.failed.map((f) => `${f.endpoint}: ${f.error}`).join("; ")));
      }
      await load();
    } catch (err) {
      if (ctx.active) replace(status, notice("error", "The catalog was not refreshed", err.message));
    } finally {
      refresh.disabled = false;
    }
  }
  let timer = null;     // the next read of the queue, while an entry is unfinished
  let following = false;   // an entry was unfinished at the last look (or was just queued)
  let queueReads = 0;   // numbers the queue reads: only the newest one's answer is drawn
  let listReads = 0;    // the same for the list
  let seen = null;      // ids of the registered entries in the newest queue read drawn
  let listedAfter = null;   // `seen` when the shown list was asked for (null: not asked yet)
  ctx.onCleanup(() => clearTimeout(timer));

  function listIsStale() {
    return listedAfter === null || [...seen].some((id) => !listedAfter.has(id));
  }

  async function loadQueue() {
    clearTimeout(timer);
    timer = null;
    const mine = ++queueReads;
    let found;
    try {
      found = await api.get("/api/onboarding", { signal: ctx.signal });
    } catch (err) {
      if (isAbort(err) || !ctx.active || mine !== queueReads) return;
      replace(queue, notice("error", "The onboarding queue could not be read", err.message));
      if (following) timer = setTimeout(loadQueue, REFRESH_MS * 2);   // a busy server recovers
      if (listedAfter === null) await load();   // the list does not wait on the queue
      return;
    }
    if (!ctx.active || mine !== queueReads) return;   // a newer read is drawn instead
    const rows = found.data || [];
    seen = new Set(rows.filter(registered).map((e) => e.id));
    following = rows.some(unfinished);
    if (following) timer = setTimeout(loadQueue, REFRESH_MS);
    if (!rows.length) {
      replace(queue);
    } else {
      const who = found.worker ? `Worked by process ${found.worker.pid}.` : null;
      replace(queue, sectionHead("Onboarding",
        "Register → probe → quick suite run, newest first." + (who ? ` ${who}` : "")),
      h("div", { class: "table-wrap", role: "region", "aria-label": "Onboarding queue entries",
        tabindex: "0" },
      h("table", null,
        h("caption", { class: "visually-hidden", text: "Onboarding queue" }),
        h("thead", null, h("tr", null,
          ["Model", "Endpoint", "Step", "Status", "Updated", "Result"].map(
            (label) => h("th", { scope: "col", text: label })))),
        h("tbody", null, rows.map(queueRow)))));
    }
    if (listIsStale()) await load();   // what was registered is on the roster now
  }

  async function onboardModel(model, btn) {
    btn.disabled = true;
    replace(status);
    try {
      await api.post("/api/onboarding", { aliases: [model.id], endpoint: model.endpoint },
        { signal: ctx.signal });
      toast(`Onboarding ${model.id} from ${model.endpoint}.`);
    } catch (err) {
      if (!ctx.active) return;
      replace(status, notice("error", `${model.id} was not queued for onboarding`, err.message));
      btn.disabled = false;
      return;
    }
    following = true;
    await loadQueue();
  }

  async function load() {
    const mine = ++listReads;
    listedAfter = new Set(seen || []);   // queue reads answered from now on compare with this
    let found;
    try {
      found = await api.get("/api/discover", { signal: ctx.signal });
    } catch (err) {
      if (mine === listReads) listedAfter = null;   // not shown: any later queue read reads it again
      throw err;
    }
    if (!ctx.active || mine !== listReads) return;
    const failed = (found.failed || []).map((f) => notice("error", `${f.endpoint} was not read`, f.error));
    if (!found.models.length) {
      // an endpoint that could not be read may serve new models: never claim there are none
      replace(body, failed, failed.length
        ? emptyState("Nothing new from the endpoints that answered",
          `Every model they list is on the roster already. ${failed.length === 1 ? "The endpoint above" : "The endpoints above"} could not be read, so what ${failed.length === 1 ? "it serves" : "they serve"} is not known yet: fix ${failed.length === 1 ? "it" : "them"} on Endpoints & models, then press Refresh catalog.`)
        : emptyState("Nothing new to add", "Every model your endpoints list is on the roster already."));
      return;
    }
    const table = h("table", null,
      h("caption", { class: "visually-hidden", text: "Models not on the roster" }),
      h("thead", null, h("tr", null,
        ["Endpoint", "Served id", "Window", "Price", "Vision", "Tools", ""].map(
          (label) => h("th", { scope: "col", text: label })))),
      h("tbody", null, found.models.map((m) => row(m, addModel, onboardModel))));
    replace(body, failed, sectionHead("Not on the roster", null), h("div", { class: "table-wrap", role: "region",
      "aria-label": "Models not on the roster", tabindex: "0" }, table));
  }

  async function addModel(model, btn) {
    btn.disabled = true;
    replace(status);
    try {
      const done = await api.post("/api/discover/add", { endpoint: model.endpoint, served: model.id },
        { signal: ctx.signal });
      const alias = done.added && done.added[0] ? done.added[0].alias : model.id;
      toast(alias === model.id ? `Added ${model.id} from ${model.endpoint}.`
        : `Added ${model.id} from ${model.endpoint} as ${alias}.`);
      await load();
    } catch (err) {
      if (!ctx.active) return;
      replace(status, notice("error", `${model.id} was not added`, err.message));
      btn.disabled = false;
    }
  }

  // the queue first: the list read after it holds whatever the queue shows registered
  await loadQueue();
}
