// The verdict form: useful or not, a note, real and false claims one per line; the quick
// buttons; the live mark. Each posts to /api/verdict (the same code as the gateway's
// /bench/verdict) through the one verdict state (verdictstate.js), and each shows that state, so
// every view of a call agrees.

import { h, newId, replace } from "./dom.js";
import { button, field, lines, notice, radios, timeAgo, verdictMark } from "./ui.js";
import { judge, learn, watch } from "./verdictstate.js";

/** A call's verdict mark (useful / not useful / owed) that follows the call's verdict state. */
export function liveMark(call, initial = undefined) {
  const slot = h("span", { class: "live-mark", dataset: { call } });
  if (initial !== undefined) replace(slot, verdictMark(initial ? Boolean(initial.useful) : null));
  watch(call, slot, (v) => replace(slot, verdictMark(v ? Boolean(v.useful) : null)));
  return slot;
}

// A button pressed while its request runs is marked busy, not disabled: a disabled button
// loses the focus (to the page), and the next key would then act somewhere else.
function busy(buttons, on) {
  for (const b of buttons) {
    if (on) b.setAttribute("aria-disabled", "true");
    else b.removeAttribute("aria-disabled");
  }
}

const isBusy = (b) => b.getAttribute("aria-disabled") === "true";

export function savedWords(result) {
  if (!result.written) return "Same verdict as before: nothing new to record.";
  return result.replaced ? "Verdict changed." : "Verdict recorded.";
}

/** The whole form, prefilled with the current verdict (or empty); onSaved(result) after a save. */
export function verdictForm(call, current, { onSaved, signal } = {}) {
  learn(call, current || null);
  const name = newId("useful");
  const choice = radios("Was this answer useful?", name,
    [["yes", "Useful"], ["no", "Not useful"]],
    current ? (current.useful ? "yes" : "no") : null);
  const note = h("textarea", { rows: 3, maxlength: 4000, value: current ? current.note || "" : "" });
  const real = h("textarea", { rows: 3, value: current ? (current.real || []).join("\n") : "" });
  const wrong = h("textarea", { rows: 3, value: current ? (current.false || []).join("\n") : "" });
  const status = h("div", { "aria-live": "polite" });
  const save = button("Save verdict", null, { kind: "primary", type: "submit" });
  // who gave the verdict now in force, kept up with the call's state (a save here or elsewhere)
  const when = h("p", { class: "muted small", "data-testid": "verdict-by" });
  const showWhen = (v) => {
    when.hidden = !(v && v.ts);
    if (when.hidden) replace(when);
    else replace(when, `Current verdict by ${v.by || "someone"}, `, timeAgo(v.ts), ".");
  };

  const form = h("form", { class: "form", novalidate: true },
    h("h3", { text: "Verdict" }),
    when,
    choice.el,
    field("Note", note, { hint: "What made it useful or not (optional)." }),
    h("div", { class: "form-grid" },
      field("Real claims", real, { hint: "One per line: what the answer got right." }),
      field("False claims", wrong, { hint: "One per line: what it asserted wrongly." })),
    status,
    h("div", { class: "form-actions" }, save));
  // a verdict saved elsewhere (a quick button, a key) shows here at once
  watch(call, form, (v) => {
    showWhen(v);
    if (v) choice.set(v.useful ? "yes" : "no");
  });

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const picked = choice.value();
    if (!picked) {
      replace(status, notice("error", "Pick Useful or Not useful first."));
      choice.inputs[0].focus();
      return;
    }
    if (isBusy(save)) return;
    busy([save], true);
    replace(status);
    try {
      const result = await judge(call, picked === "yes",
        { note: note.value, real: lines(real.value), false: lines(wrong.value) }, signal);
      replace(status, notice("ok", savedWords(result)));
      if (onSaved) onSaved(result);
    } catch (err) {
      replace(status, notice("error", "Not saved", err.message));
    } finally {
      busy([save], false);
    }
  });
  return form;
}

/** Two quick buttons (Useful / Not useful, keys u and n where a page takes them), pressed as the
 * call's verdict state says; the full form is one click away. */
export function quickVerdict(call, { onSaved, signal, onMore } = {}) {
  const status = h("span", { class: "saved", "aria-live": "polite" });
  const yes = button("Useful", () => send(true), { small: true, kind: "ok-choice", "aria-pressed": "false", "aria-keyshortcuts": "u" });
  const no = button("Not useful", () => send(false), { small: true, kind: "bad-choice", "aria-pressed": "false", "aria-keyshortcuts": "n" });
  async function send(useful) {
    if (isBusy(yes)) return;
    busy([yes, no], true);
    try {
      const result = await judge(call, useful, null, signal);
      status.textContent = savedWords(result);
      if (onSaved) onSaved(result);
    } catch (err) {
      status.textContent = `Not saved: ${err.message}`;
    } finally {
      busy([yes, no], false);
    }
  }
  const row = h("div", { class: "verdict-row", role: "group", "aria-label": `Verdict for ${call}` },
    h("span", { class: "muted small" }, "Verdict:"), yes, no,
    onMore ? button("Add a note or claims…", onMore, { small: true, kind: "ghost" }) : null,
    status);
  watch(call, row, (v) => {
    yes.setAttribute("aria-pressed", String(Boolean(v && v.useful === true)));
    no.setAttribute("aria-pressed", String(Boolean(v && v.useful === false)));
  });
  return row;
}
