// A row's less frequent actions behind one "More" button, so a long table carries two buttons
// a row instead of four. A disclosure, not an ARIA menu: the actions stay ordinary buttons
// (their names unchanged), shown under the button while it is expanded.
//
// It closes when an action is pressed, on Escape (the focus goes back to the button) and when the
// focus leaves it; it listens on itself only, so 500 rows add no listener to the document.

import { h, newId } from "./dom.js";

/** `label`: the button's accessible name ("More for sim-swift"); `items`: buttons. */
export function moreMenu(label, items) {
  const id = newId("more");
  const panel = h("div", { class: "more-items", id, hidden: true }, items);
  const toggle = h("button", {
    type: "button", class: "btn small", "aria-expanded": "false", "aria-controls": id, "aria-label": label,
  }, "More", h("span", { "aria-hidden": "true" }, " ▾"));
  const wrap = h("span", { class: "more" }, toggle, panel);
  const set = (open) => {
    panel.hidden = !open;
    toggle.setAttribute("aria-expanded", String(open));
  };
  toggle.addEventListener("click", () => {
    const open = panel.hidden;
    set(open);
    if (open) { const first = panel.querySelector("button:not([disabled])"); if (first) first.focus(); }
  });
  panel.addEventListener("click", (event) => { if (event.target.closest("button")) set(false); });
  wrap.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && !panel.hidden) { event.preventDefault(); event.stopPropagation(); set(false); toggle.focus(); }
  });
  wrap.addEventListener("focusout", (event) => { if (!wrap.contains(event.relatedTarget)) set(false); });
  return wrap;
}
