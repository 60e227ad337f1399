// Answers side by side: a grid of cards, one a seat, and a row of tabs over them that takes over
// on a narrow screen (below 700 px, judge.css shows only the chosen card). One card is current at
// any time: the one the tabs chose, the focus moved to, or the judging keys went to.

import { h, newId } from "./dom.js";

/** The cards side by side with their tabs; returns {el, select(i), index(card)}. */
export function comparison(cards, { label = "Answers", names = [] } = {}) {
  const tabs = cards.map((card, i) => {
    if (!card.id) card.id = newId("answer");
    card.setAttribute("tabindex", "-1");
    const tab = h("button", {
      type: "button", role: "tab", class: "compare-tab", "aria-controls": card.id,
      "aria-selected": "false", tabindex: "-1",
      on: { click: () => select(i), keydown: (e) => arrows(e, i) },
    }, names[i] || `Answer ${i + 1}`);
    return tab;
  });
  function select(i, { focus = false } = {}) {
    cards.forEach((card, k) => card.classList.toggle("is-current", k === i));
    tabs.forEach((tab, k) => {
      tab.setAttribute("aria-selected", String(k === i));
      tab.tabIndex = k === i ? 0 : -1;
    });
    if (focus) tabs[i].focus();
  }
  function arrows(event, i) {
    const step = { ArrowRight: 1, ArrowLeft: -1 }[event.key];
    if (!step) return;
    event.preventDefault();
    select((i + step + cards.length) % cards.length, { focus: true });
  }
  // a card the focus moves into becomes the current one (its tab follows)
  cards.forEach((card, i) => card.addEventListener("focusin", () => select(i)));
  if (cards.length) select(0);
  const el = h("div", { class: "compare" },
    h("div", { class: "compare-tabs", role: "tablist", "aria-label": label }, tabs),
    h("div", { class: "compare-grid" }, cards));
  return { el, select, index: (card) => cards.indexOf(card) };
}
