// The verdict form: useful or not, a note, real and false claims one per line. It posts to
// /api/verdict, which runs the same code as the gateway's /bench/verdict.

import { api } from "./api.js";
import { h, newId, replace } from "./dom.js";
import { button, field, lines, notice, radios, timeAgo } from "./ui.js";

export async function postVerdict(call, useful, { note = "", real = [], false: wrong = [] } = {}, signal) {
  return api.post("/api/verdict", { call, useful, note, real, false: wrong }, { signal });
}

export function savedWords(result) {
  if (!result.written) return "Same verdict as before: nothing new to record.";
  return result.replaced ? "Verdict changed." : "Verdict recorded.";
}

/** The whole form, prefilled with the current verdict (or empty); onSaved(result) after a save. */
export function verdictForm(call, current, { onSaved, signal } = {}) {
  const name = newId("useful");
  const choice = radios("Was this answer useful?", name,
    [["yes", "Useful"], ["no", "Not useful"]],
    current ? (current.useful ? "yes" : "no") : null);
  const note = h("textarea", { rows: 3, maxlength: 4000, value: current ? current.note || "" : "" });
  const real = h("textarea", { rows: 3, value: current ? (current.real || []).join("\n") : "" });
  const wrong = h("textarea", { rows: 3, value: current ? (current.false || []).join("\n") : "" });
  const status = h("div", { "aria-live": "polite" });
  const save = button("Save verdict", null, { kind: "primary", type: "submit" });
  const when = current && current.ts
    ? h("p", { class: "muted small" }, `Current verdict by ${current.by || "someone"}, `, timeAgo(current.ts), ".")
    : null;

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

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const picked = choice.value();
    if (!picked) {
      replace(status, notice("error", "Pick Useful or Not useful first."));
      choice.inputs[0].focus();
      return;
    }
    save.disabled = true;
    replace(status);
    try {
      const result = await postVerdict(call, picked === "yes",
        { note: note.value, real: lines(real.value), false: lines(wrong.value) }, signal);
      replace(status, notice("ok", savedWords(result)));
      if (onSaved) onSaved(result);
    } catch (err) {
      replace(status, notice("error", "Not saved", err.message));
    } finally {
      save.disabled = false;
    }
  });
  return form;
}

/** Two quick buttons (Useful / Not useful) for the Ask page; the full form is one click away. */
export function quickVerdict(call, { onSaved, signal, onMore } = {}) {
  const status = h("span", { class: "saved", "aria-live": "polite" });
  const yes = button("Useful", () => send(true), { small: true, kind: "ok-choice", "aria-pressed": "false" });
  const no = button("Not useful", () => send(false), { small: true, kind: "bad-choice", "aria-pressed": "false" });
  async function send(useful) {
    yes.disabled = true;
    no.disabled = true;
    try {
      const result = await postVerdict(call, useful, {}, signal);
      yes.setAttribute("aria-pressed", String(useful));
      no.setAttribute("aria-pressed", String(!useful));
      status.textContent = savedWords(result);
      if (onSaved) onSaved(result);
    } catch (err) {
      status.textContent = `Not saved: ${err.message}`;
    } finally {
      yes.disabled = false;
      no.disabled = false;
    }
  }
  return h("div", { class: "verdict-row", role: "group", "aria-label": `Verdict for ${call}` },
    h("span", { class: "muted small" }, "Verdict:"), yes, no,
    onMore ? button("Add a note or claims…", onMore, { small: true, kind: "ghost" }) : null,
    status);
}
