// The judging keys of a page: u (useful), n (not useful), j (next answer owed a verdict).
// Kept out of the way of typing: a key pressed in a field, with a modifier, or while a dialog is
// open is left alone.

import { h } from "./dom.js";

export const KEYS = [["u", "useful"], ["n", "not useful"], ["j", "next owed"]];

/** Listen for the keys while the page is shown: handlers {u, n, j}, each called with no arguments. */
export function judgingKeys(ctx, handlers) {
  const onKey = (event) => {
    if (event.defaultPrevented || event.ctrlKey || event.metaKey || event.altKey || event.repeat) return;
    const t = event.target;
    if (t instanceof Element && t.closest("input, textarea, select, [contenteditable], dialog")) return;
    if (document.querySelector("dialog[open]")) return;
    const fn = handlers[event.key];
    if (!fn) return;
    event.preventDefault();
    fn();
  };
  document.addEventListener("keydown", onKey);
  ctx.onCleanup(() => document.removeEventListener("keydown", onKey));
}

/** The keys, as the page shows them. */
export function keysHint(extra = []) {
  const all = [...extra, ...KEYS];
  return h("p", { class: "keys-hint small muted", "aria-label": "Keyboard shortcuts" },
    "Keys: ", all.map(([key, what], i) => [i ? " · " : "", h("kbd", { text: key }), ` ${what}`]));
}
