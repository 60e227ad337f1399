// Collections: each named panel with its members, make-up and use (panels, seats, verdicts, and
// spend against its caps: GET /api/collections' "use"), a filter over them, the form to make or edit one
// (members picked from the roster with the live sum "N members + M explorers = K calls"), and
// the gateway's limits. Edits send the version they read, so a concurrent change is a 409.

import { api, seg } from "../api.js";
import { h, replace } from "../dom.js";
import * as fmt from "../format.js";
import {
  button, clearFieldErrors, confirmAction, emptyState, field, input, linkButton, notice, numberOrNull, openDialog,
  modelHref, modelLink, pageHead, radios, saveForm, sectionHead, select, showFieldError, toast, words,
} from "../ui.js";

export const title = "Collections";

export function explorersFor(members, limits) {
  return Math.max(0, Math.min(limits.max_explorers, limits.max_calls - members));
}

function sumLine(members, limits) {
  const explorers = explorersFor(members, limits);
  const over = members > limits.max_calls;
  const calls = members + explorers;
  const part = (n, one, many) => h("span", null, h("strong", { text: String(n) }), ` ${n === 1 ? one : many}`);
  return h("span", { class: ["sum", over && "over"], "data-testid": "calls-sum" },
    part(members, "member", "members"), h("span", null, " + "),
    part(explorers, "explorer", "explorers"), h("span", null, " = "),
    part(calls, "call", "calls"));
}

// how a card names each reply mode (collection.REPLIES)
const REPLY_BADGE = { all: "every answer", merged: "one merged reply", pick: "one picked answer" };

/** The Ask page with this collection chosen. */
export function askLink(c) {
  const id = c.id || `bench/${c.name}`;
  const a = linkButton("Ask", `#/ask?collection=${encodeURIComponent(id)}`, "small primary");
  a.setAttribute("aria-label", `Ask ${id}`);
  return a;
}

function collectionCard(c, limits, models, { onEdit, onDelete }) {
  const byAlias = new Map(models.map((m) => [m.alias, m]));
  return h("article", { class: "card collection-card", dataset: { collection: c.name } },
    h("div", { class: "card-head" },
      h("h2", { class: "card-title mono", text: c.id || `bench/${c.name}` }),
      h("div", { class: "actions-row" },
        askLink(c),
        button("Edit", () => onEdit(c), { small: true, "aria-label": `Edit ${c.name}` }),
        button("Delete", () => onDelete(c), { small: true, kind: "danger", "aria-label": `Delete ${c.name}` }))),
    h("div", { class: "row" },
      sumLine(c.members.length, limits),
      h("span", { class: "badge outline" }, REPLY_BADGE[c.reply] || REPLY_BADGE.all),
      h("span", { class: "badge outline" }, c.shape ? `shape: ${c.shape}` : "shape: automatic")),
    c.description ? h("p", { class: "desc", text: c.description }) : h("p", { class: "desc none", text: "No description: callers choosing a collection see none." }),
    h("div", { class: "tags" },
      c.members.map((alias) => {
        const m = byAlias.get(alias);
        const kind = !m ? "bad" : m.status === "answering" ? "ok" : m.status === "cooling" ? "warn" : "";
        return h("a", { class: ["chip", kind, "model-link"], href: modelHref(alias), title: m ? `${alias}: ${m.status}` : `${alias} is not on the roster` },
          h("span", { class: "dot", "aria-hidden": "true" }), alias);
      })),
    h("div", { class: "meta" },
      c.tags && c.tags.length ? h("span", null, "Tags ", h("strong", { text: c.tags.join(", ") })) : null,
      c.merger ? h("span", null, "Merger ", modelLink(c.merger)) : null),
    useLine(c.use));
}

// what the collection was used for: panels, seats and verdicts since the logs began, and
// spend against its caps (counted only under a cap, so an uncapped one says so, not "0")
function useLine(use) {
  if (!use) return null;
  const figure = (label, value) => h("span", null, `${label} `, h("strong", { text: value }));
  const judged = use.useful + use.not_useful;
  const spend = use.spend;
  const capped = (p, label) => (spend && spend[p]
    ? figure(label, `${fmt.money(spend[p].spent, spend.currency)} of ${fmt.money(spend[p].cap, spend.currency)}`)
    : null);
  return h("p", { class: "meta", "data-testid": "collection-use" },
    figure("Panels", fmt.count(use.panels)),
    figure("Seats", fmt.count(use.seats)),
    figure("Useful", judged ? `${fmt.count(use.useful)} of ${fmt.count(judged)}` : "no verdicts"),
    spend ? [capped("day", "Spent today"), capped("month", "this month")]
      : h("span", { class: "muted", title: "Spend is counted for a collection with a spend cap (Settings, or panelist collection save … --budget-day)" }, "Spend not counted: no cap"));
}

// the cards a filter keeps: by name, description, tags and members
function cardFilter(cards, list) {
  const box = input({ type: "search", placeholder: "Filter by name, member or tag", "aria-label": "Filter the collections", autocomplete: "off" });
  const shown = h("span", { class: "muted small", "aria-live": "polite" });
  const texts = list.map((c) => [c.name, c.description, ...(c.tags || []), ...c.members].join(" ").toLowerCase());
  const apply = () => {
    const needle = box.value.trim().toLowerCase();
    let kept = 0;
    cards.forEach((card, i) => {
      card.hidden = Boolean(needle) && !texts[i].includes(needle);
      if (!card.hidden) kept += 1;
    });
    shown.textContent = kept === list.length ? fmt.plural(list.length, "collection") : `${fmt.count(kept)} of ${fmt.count(list.length)} shown`;
  };
  box.addEventListener("input", apply);
  apply();
  return h("div", { class: "table-tools" }, h("div", { class: "row" }, box), shown);
}

function cardGrid(cards, list) {
  return h("div", { class: "stack" }, cardFilter(cards, list), h("div", { class: "grid cols-2" }, cards));
}

function memberPicker(models, chosen, onChange) {
  const selected = new Set(chosen);
  const filter = input({ type: "search", placeholder: "Filter models", "aria-label": "Filter the models" });
  const list = h("div", { class: "picker-list", role: "group", "aria-label": "Models on the roster" });
  const chosenEl = h("div", { class: "chosen", "aria-live": "polite" });
  const boxes = new Map();

  const rows = models.map((m) => {
    const box = h("input", { type: "checkbox", value: m.alias, checked: selected.has(m.alias) });
    boxes.set(m.alias, box);
    box.addEventListener("change", () => {
      if (box.checked) selected.add(m.alias); else selected.delete(m.alias);
      showChosen();
    });
    const row = h("label", { class: "picker-item", dataset: { alias: m.alias } },
      box,
      h("span", null, h("span", { text: m.alias }),
        h("span", { class: "sub inline" }, [m.family, m.grade, m.endpoint].filter(Boolean).join(" · "))),
      h("span", { class: "sub" }, m.status === "answering" ? "" : m.status));
    row.__text = `${m.alias} ${m.family} ${m.grade} ${m.endpoint}`.toLowerCase();
    return row;
  });
  list.append(...rows);
  filter.addEventListener("input", () => {
    const needle = filter.value.trim().toLowerCase();
    for (const row of rows) row.hidden = Boolean(needle) && !row.__text.includes(needle);
  });

  function showChosen() {
    const members = [...selected];
    replace(chosenEl, members.length
      ? members.map((a) => h("span", { class: "chip accent" }, a,
        h("button", {
          type: "button", class: "btn ghost small", "aria-label": `Remove ${a}`,
          on: { click: () => { selected.delete(a); boxes.get(a).checked = false; showChosen(); } },
        }, "×")))
      : h("span", { class: "muted small" }, "No member chosen yet."));
    onChange(members);
  }
  showChosen();
  return {
    el: h("div", { class: "picker" },
      h("div", { class: "picker-tools" }, filter),
      list,
      h("div", { class: "picker-tools" }, chosenEl)),
    value: () => [...selected],
  };
}

function editCollection(existing, limits, models, shapes, done) {
  const editing = Boolean(existing);
  const c = existing || { name: "", members: [], description: "", tags: [], shape: "", reply: "all", merger: "" };
  openDialog({
    title: editing ? `Edit bench/${c.name}` : "New collection",
    sub: "A collection is a named panel: its members sit in every panel, explorers rotate in.",
    wide: true,
  }, ({ close }) => {
    const name = input({ name: "name", value: c.name, disabled: editing, required: true, pattern: "[a-z0-9-]{1,64}", maxlength: 64 });
    const description = h("textarea", { name: "description", rows: 2, maxlength: 300, value: c.description || "" });
    const counter = h("div", { class: "counter" });
    const showCount = () => {
      counter.textContent = `${description.value.length} / 300`;
      counter.classList.toggle("over", description.value.length > 300);
    };
    description.addEventListener("input", showCount);
    showCount();
    const tags = input({ name: "tags", value: (c.tags || []).join(", ") });
    const shapeList = h("datalist", { id: "shape-options" }, shapes.map((sh) => h("option", { value: sh })));
    const shape = input({ name: "shape", value: c.shape || "", list: "shape-options", placeholder: "automatic" });
    const reply = radios("Reply", "reply", [["all", "Every answer, labelled"], ["merged", "One merged answer"],
      ["pick", "One seat's answer, verbatim (pick)"]], c.reply || "all");
    const merger = select([["", "Automatic (most useful member)"], ...models.map((m) => [m.alias, m.alias])], c.merger || "");
    const sumSlot = h("div", { "aria-live": "polite" });
    const picker = memberPicker(models, c.members, (members) => replace(sumSlot, sumLine(members.length, limits),
      members.length > limits.max_calls ? h("span", { class: "small text-bad" }, ` — more than max calls (${limits.max_calls})`) : null));
    const status = h("div");
    const save = button(editing ? "Save changes" : "Create collection", null, { kind: "primary", type: "submit" });

    const form = h("form", { class: "form", novalidate: true },
      h("div", { class: "form-grid" },
        field("Name", name, { hint: editing ? "Names cannot change; make a new collection instead." : "Lower-case letters, digits and -. Callers ask for bench/<name>. Say what it is for (reviewers), not who is in it." }),
        field("Tags", tags, { hint: "Up to 8 lower-case words, separated by commas." }),
        h("div", { class: "field wide" },
          h("label", { for: "collection-description", text: "Description" }),
          description, counter,
          h("span", { class: "hint", id: "collection-description-hint", text: "What it is for, for a caller choosing a collection (up to 300 characters)." }))),
      h("fieldset", null, h("legend", { text: "Members" }),
        h("p", { class: "muted small" }, "Two to four members is a good panel. Explorer seats are added by the gateway to gather evidence on other models."),
        picker.el, sumSlot),
      h("div", { class: "form-grid" },
        field("Shape", shape, { hint: "The kind of work (review, design…). Blank: decided per request." }),
        field("Merger", merger, { hint: "Writes the merged answer when the reply is merged." }),
        h("div", { class: "field" }, reply.el)),
      shapeList,
      status,
      h("div", { class: "form-actions" }, button("Cancel", close), save));
    description.id = "collection-description";
    description.setAttribute("aria-describedby", "collection-description-hint");

    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const body = {
        name: name.value.trim(), members: picker.value(), description: description.value.trim(),
        tags: words(tags.value), shape: shape.value.trim(), reply: reply.value() || "all",
        merger: merger.value,
        // not on this form yet: kept as it is, so an edit does not reset it
        explorer_policy: c.explorer_policy || "staleness",
      };
      clearFieldErrors(form);
      if (!body.name) { showFieldError(form, { param: "name", message: "Give the collection a name." }); return; }
      if (!body.members.length) { replace(status, notice("error", "Pick at least one member.")); return; }
      await saveForm({
        save, status, close, done,
        send: () => (editing
          ? api.put(`/api/collections/${seg(c.name)}`, { ...body, version: c.version })
          : api.post("/api/collections", body)),
        said: editing ? `Saved bench/${body.name}.` : `Created bench/${body.name}.`,
      });
    });
    return { body: form };
  });
}

const LIMIT_FIELDS = [
  ["max_calls", "Max calls per panel", "Members plus explorers never exceed this.", 1],
  ["max_explorers", "Max explorers", "Explorer seats added to each panel, when max calls leaves room.", 1],
  ["seat_timeout", "Seat timeout (s)", "How long one seat may take.", 0.1],
  ["panel_timeout", "Panel timeout (s)", "How long the whole request may take, merge included.", 0.1],
  ["cooldown", "Cooldown (s)", "Rest after a rate limit when the provider names none.", 0.1],
  ["max_cooldown", "Max cooldown (s)", "The longest rest a provider's Retry-After can impose.", 0.1],
];

function limitsForm(limits, done) {
  const inputs = {};
  const status = h("div");
  const save = button("Save limits", null, { kind: "primary", type: "submit" });
  const form = h("form", { class: "card form", novalidate: true, "aria-label": "Gateway limits" },
    h("div", { class: "form-grid" }, LIMIT_FIELDS.map(([key, label, hint, step]) => {
      inputs[key] = input({ type: "number", name: key, min: 0, step, value: limits[key], inputmode: "decimal" });
      return field(label, inputs[key], { hint });
    })),
    status,
    h("div", { class: "form-actions" }, save));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const body = { version: limits.version };
    for (const [key] of LIMIT_FIELDS) body[key] = numberOrNull(inputs[key].value);
    await saveForm({ save, status, done, send: () => api.put("/api/limits", body),
      said: "Limits saved." });
  });
  return form;
}

export async function render(root, ctx) {
  const [cols, models] = await Promise.all([
    api.get("/api/collections", { signal: ctx.signal }),
    api.get("/api/models", { signal: ctx.signal }),
  ]);
  const limits = cols.limits;
  const roster = (models.data || []).slice().sort((a, b) => a.alias.localeCompare(b.alias));
  const shapes = models.shapes || [];
  const reload = () => render(root, ctx).catch((err) => toast(err.message, { kind: "error" }));
  const onEdit = (c) => editCollection(c, limits, roster, shapes, reload);
  const onDelete = async (c) => {
    if (!await confirmAction(`Delete bench/${c.name}?`,
      `Callers asking for bench/${c.name} will be refused. Its panels and verdicts stay in the logs.`)) return;
    try {
      await api.del(`/api/collections/${seg(c.name)}`);
      toast(`Deleted bench/${c.name}.`);
      reload();
    } catch (err) {
      toast(err.message, { kind: "error" });
    }
  };
  const create = button("New collection", () => editCollection(null, limits, roster, shapes, reload), { kind: "primary" });
  if (!roster.length) create.disabled = true;
  const list = cols.data || [];
  // #/collections?new=1 (the next step after the first models) opens the form at once
  const opening = ctx.params.get("new") === "1" && roster.length && !list.length;
  replace(root,
    pageHead("Collections", "A collection is a named panel of models that callers ask for as bench/<name>. "
      + "Each request seats its members plus explorer seats that rotate in other models.", create),
    list.length
      ? cardGrid(list.map((c) => collectionCard(c, limits, roster, { onEdit, onDelete })), list)
      : roster.length
        ? emptyState("No collection yet", "Make one: pick two to four models and say what the panel is for.",
          button("New collection", () => editCollection(null, limits, roster, shapes, reload), { kind: "primary" }))
        : emptyState("No model to pick from yet", "Add an endpoint and its models first, then make a collection of them.",
          linkButton("Endpoints & models", "#/endpoints", "primary")),
    h("section", { class: "section" },
      sectionHead("Gateway limits", `Every panel: ${limits.max_calls} calls at most, up to ${limits.max_explorers} of them explorers. `
        + `${fmt.seconds(limits.seat_timeout)} per seat, ${fmt.seconds(limits.panel_timeout)} per panel.`),
      limitsForm(limits, reload)));
  if (opening) {
    history.replaceState(null, "", "#/collections");
    editCollection(null, limits, roster, shapes, reload);
  }
}
