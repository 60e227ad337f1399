// The grades, weakest first, as the Overview shows and edits them: move a grade up or down, pin
// the model the deployment uses for it, name the ceiling (the strongest model, a race's judge),
// add a grade models use that the order leaves out. Each change is one PUT carrying the version
// the listing gave, so an edit made elsewhere meanwhile is refused (reload) instead of undone;
// the section is drawn again from the listing the server answers with. At scale, a grade's
// models fold into their count, a pick among many is a box that filters, and a reorder that
// would change the ceiling (a race's judge) asks first and says so after.

import { api } from "./api.js";
import { h, newId, replace } from "./dom.js";
import { button, confirmAction, notice, sectionHead, select, showError, toast } from "./ui.js";

const NONE = "";
// past this many models a menu is a wall to scroll: a box that filters as you type instead
const MENU_MAX = 20;
// past this many, a grade's models fold into their count
const LIST_MAX = 8;

// A choice among `models`: a menu while they are few, else a text box with the models as its
// suggestions (the browser filters them as one types); a name that is none of them is refused
// beside the box. `chosen(value or null)` is called with the pick; "" (none) is `blank`'s.
function modelChoice(models, current, blank, attrs, chosen) {
  if (models.length <= MENU_MAX) {
    const options = [[NONE, blank], ...models.map((a) => [a, a])];
    if (current && !models.includes(current)) options.push([current, current]);
    const picker = select(options, current || NONE, { ...attrs, class: "fit" });
    picker.addEventListener("change", () => chosen(picker.value || null));
    return picker;
  }
  const listId = newId("models");
  const box = h("input", { ...attrs, type: "search", list: listId, value: current || "", placeholder: `${blank} (type to find one of ${models.length})`, autocomplete: "off", class: "model-choice" });
  const said = h("span", { class: "field-error", role: "alert", hidden: true });
  box.addEventListener("change", () => {
    const value = box.value.trim();
    said.hidden = true;
    if (value === (current || "")) return;
    if (value && !models.includes(value)) {
      said.textContent = `${value} is not one of these ${models.length} models.`;
      said.hidden = false;
      return;
    }
    chosen(value || null);
  });
  return h("span", { class: "row" }, box, h("datalist", { id: listId }, models.map((a) => h("option", { value: a }))), said);
}

function pinPicker(g, onPin) {
  return modelChoice(g.models, g.pinned, "not pinned", { "aria-label": `Model pinned for ${g.grade}` },
    (alias) => onPin(g.grade, alias));
}

function ceilingPicker(grades, onCeiling) {
  const models = [...new Set(grades.grades.flatMap((g) => g.models))].sort();
  const ceiling = grades.ceiling || {};
  return modelChoice(models, ceiling.set ? ceiling.alias : null, "the strongest grade's pin", { id: "ceiling-picker" }, onCeiling);
}

// a grade's models: listed while few, else their count with the list folded under it
function modelsOf(g) {
  if (!g.models.length) return h("span", { class: "faint", text: "no model" });
  if (g.models.length <= LIST_MAX) return g.models.join(", ");
  return h("details", { class: "fold" }, h("summary", null, `${g.models.length} models`),
    h("p", { class: "small", text: g.models.join(", ") }));
}

// the ceiling an order would give while none is set by hand: the strongest pinned grade's model
function ceilingAfter(grades, order) {
  const pins = new Map(grades.grades.map((g) => [g.grade, g.pinned]));
  for (let i = order.length - 1; i >= 0; i -= 1) if (pins.get(order[i])) return pins.get(order[i]);
  return null;
}

/** The grades section; `grades` is GET /api/grades. Its buttons write through the server. */
export function gradesSection(initial, ctx) {
  const section = h("section", { class: "section", id: "grades" });
  const status = h("div", { "aria-live": "polite", "data-testid": "grades-status" });
  let grades = initial;

  // The section is drawn anew after each change: the control that had the focus gets it back
  // (the same control of the same grade; an Up or Down that can no longer move, its sibling),
  // so a keyboard user goes on where they were.
  const keyOf = (el) => (el && section.contains(el) && el.matches("button, select")
    ? el.getAttribute("aria-label") || el.id || el.textContent : null);
  function refocus(key) {
    if (!key || (document.activeElement && document.activeElement !== document.body
      && !section.contains(document.activeElement))) return;
    const same = [...section.querySelectorAll("button, select")].find((el) => keyOf(el) === key);
    const target = same && same.disabled
      ? [...same.parentElement.querySelectorAll("button, select")].find((el) => !el.disabled) : same;
    if (target) target.focus();
  }

  async function write(path, body, said) {
    const key = keyOf(document.activeElement);
    section.querySelectorAll("button, select").forEach((el) => { el.disabled = true; });
    replace(status);
    try {
      grades = await api.put(path, { ...body, version: grades.version }, { signal: ctx.signal });
      draw();
      refocus(key);
      toast(said(grades));
    } catch (err) {
      draw();
      refocus(key);
      showError(status, err, async () => {
        grades = await api.get("/api/grades", { signal: ctx.signal });
        replace(status);
        draw();
      });
    }
  }

  const order = () => grades.grades.map((g) => g.grade);
  // a reorder that moves the ceiling changes a race's judge: asked first, and said after
  const move = async (i, by) => {
    const next = order();
    [next[i], next[i + by]] = [next[i + by], next[i]];
    const ceiling = grades.ceiling || {};
    const judge = ceiling.set ? ceiling.alias : ceilingAfter(grades, next);
    const changes = !ceiling.set && judge !== (ceiling.alias || null);
    if (changes && !await confirmAction("Change the race judge?",
      `With ${next.join(", ")} (weakest first), the ceiling, which judges races, becomes ${judge || "none"} instead of ${ceiling.alias || "none"}.`,
      "Reorder")) return;
    write("/api/grades/order", { order: next }, (now) => `Grades, weakest first: ${next.join(", ")}.`
      + (changes ? ` The ceiling, which judges races, is now ${(now.ceiling || {}).alias || "none"}.` : ""));
  };
  const addGrade = (grade) => write("/api/grades/order", { order: [...order(), grade] },
    () => `Added ${grade} as the strongest grade; move it where it belongs.`);
  const pin = (grade, alias) => write("/api/grades/pin", alias ? { grade, alias } : { grade, clear: true },
    () => (alias ? `${alias} is pinned for ${grade}.` : `${grade} has no pin now.`));
  const setCeiling = (alias) => write("/api/grades/ceiling", alias ? { alias } : { clear: true },
    (now) => `The ceiling is ${now.ceiling.alias || "none"}.`);

  function draw() {
    const list = grades.grades || [];
    const ceiling = grades.ceiling || {};
    const rows = list.map((g, i) => h("tr", { "data-grade": g.grade },
      h("td", { class: "numeric" }, String(g.rank)),
      h("th", { scope: "row", text: g.grade }),
      h("td", null, h("span", { class: "row" }, pinPicker(g, pin),
        g.pinned && g.pinned === ceiling.alias ? h("span", { class: "badge accent", text: "ceiling" }) : null,
        g.problem ? h("span", { class: "badge warn", text: g.problem }) : null)),
      h("td", null, modelsOf(g)),
      h("td", null, h("span", { class: "row" },
        button("Up", () => move(i, -1), { small: true, disabled: i === 0, "aria-label": `Move ${g.grade} up (weaker)` }),
        button("Down", () => move(i, 1), { small: true, disabled: i === list.length - 1, "aria-label": `Move ${g.grade} down (stronger)` })))));
    const note = ceiling.alias
      ? `Ceiling (the strongest model, a race's judge): ${ceiling.alias}${ceiling.set ? ", set by hand" : ", the strongest pinned grade's model"}${ceiling.problem ? ` (${ceiling.problem})` : ""}.`
      : "No ceiling yet: pin a model for a grade above, or pick one here.";
    const unordered = (grades.unordered || []).length
      ? h("div", { class: "row", "data-testid": "unordered" },
        h("span", { class: "muted small", text: "Grades models use that the order leaves out:" }),
        grades.unordered.map((g) => button(`Add ${g}`, () => addGrade(g), { small: true })))
      : null;
    replace(section,
      sectionHead("Grades", "Weakest first, each with the model the deployment uses for it: pick a model to pin it, "
        + "and move a grade up or down to reorder them."),
      status,
      rows.length
        ? h("div", { class: "table-wrap" }, h("table", null,
          h("thead", null, h("tr", null, ["#", "Grade", "Pinned model", "Models of the grade", "Order"].map((t, i) => h("th", { scope: "col", class: i === 0 ? "numeric" : null }, t)))),
          h("tbody", null, rows)))
        : notice("", "No grade yet", "Give a model a grade on Endpoints & models; its grade then shows here to add."),
      h("p", { class: "muted small", id: "ceiling", text: note }),
      h("div", { class: "row" },
        h("label", { for: "ceiling-picker", text: "Ceiling" }), ceilingPicker(grades, setCeiling)),
      unordered);
  }
  draw();
  return section;
}
