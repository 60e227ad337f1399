// The grades, weakest first, as the Overview shows and edits them: move a grade up or down, pin
// the model the deployment uses for it, name the ceiling (the strongest model, a race's judge),
// add a grade models use that the order leaves out. Each change is one PUT carrying the version
// the listing gave, so an edit made elsewhere meanwhile is refused (reload) instead of undone;
// the section is drawn again from the listing the server answers with.

import { api } from "./api.js";
import { h, replace } from "./dom.js";
import { button, notice, sectionHead, select, showError, toast } from "./ui.js";

const NONE = "";

function pinPicker(g, onPin) {
  const options = [[NONE, "not pinned"], ...g.models.map((a) => [a, a])];
  if (g.pinned && !g.models.includes(g.pinned)) options.push([g.pinned, g.pinned]);
  const picker = select(options, g.pinned || NONE, { "aria-label": `Model pinned for ${g.grade}`, class: "fit" });
  picker.addEventListener("change", () => onPin(g.grade, picker.value || null));
  return picker;
}

function ceilingPicker(grades, onCeiling) {
  const models = [...new Set(grades.grades.flatMap((g) => g.models))].sort();
  const ceiling = grades.ceiling || {};
  const options = [[NONE, "the strongest grade's pin"], ...models.map((a) => [a, a])];
  if (ceiling.set && ceiling.alias && !models.includes(ceiling.alias)) options.push([ceiling.alias, ceiling.alias]);
  const picker = select(options, ceiling.set ? ceiling.alias : NONE, { id: "ceiling-picker", class: "fit" });
  picker.addEventListener("change", () => onCeiling(picker.value || null));
  return picker;
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
  const move = (i, by) => {
    const next = order();
    [next[i], next[i + by]] = [next[i + by], next[i]];
    write("/api/grades/order", { order: next }, () => `Grades, weakest first: ${next.join(", ")}.`);
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
      h("td", null, g.models.length ? g.models.join(", ") : h("span", { class: "faint", text: "no model" })),
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
