// Start a race from the page, with the options `panelist race` takes that fit a form: the grade,
// the prompt (and a system text and rubric), runs per candidate, the judges, the candidates and
// how the judges are weighted (equally, or by their agreement with people: a judge check).
// POST /api/races starts it in the server's background, so closing the page stops nothing; the
// page then opens the race, whose progress it follows until it ends. A refusal is shown beside
// the field it names (the server's `param`), else under the form.

import { api, isAbort } from "./api.js";
import { h, replace } from "./dom.js";
import { button, field, input, notice, openDialog, select, toast, words } from "./ui.js";

/** A field whose refusal shows under it: {el, control, slot}. */
function checked(label, control, opts) {
  const slot = h("div", { class: "field-error", "aria-live": "polite" });
  const el = field(label, control, opts);
  el.append(slot);
  return { el, control, slot };
}

/** The Start a race button; `ctx` is the page's, `onStarted(race)` opens the race. */
export function startRaceButton(ctx, onStarted) {
  const open = async () => {
    let grades;
    try {
      grades = await api.get("/api/grades", { signal: ctx.signal });
    } catch (err) {
      if (!isAbort(err)) toast(`The grades could not be read: ${err.message}`, { kind: "error" });
      return;
    }
    openDialog({ title: "Start a race", sub: "The grade's pinned model runs the job first (the reference); every "
      + "other model of the grade runs it too, and the judges score each run blind against the reference." },
    ({ close }) => raceForm(grades, close, onStarted, ctx));
  };
  return button("Start a race", open, { kind: "primary", "data-testid": "start-race" });
}

function raceForm(grades, close, onStarted, ctx) {
  const pinned = (grades.grades || []).filter((g) => g.pinned);
  const options = (grades.grades || []).map((g) => [g.grade, g.pinned ? `${g.grade} (reference ${g.pinned})` : `${g.grade} (no pin)`]);
  const fields = {
    grade: checked("Grade", select(options, (pinned[pinned.length > 1 ? 1 : 0] || {}).grade || "", { name: "grade" }),
      { hint: "The job's grade: its pinned model is the reference." }),
    prompt: checked("Prompt", h("textarea", { rows: 5, name: "prompt", required: true }),
      { hint: "What the job sends the model.", wide: true }),
    system: checked("System text", h("textarea", { rows: 2, name: "system" }), { hint: "Optional.", wide: true }),
    rubric: checked("Rubric", input({ name: "rubric" }), { hint: "Optional: what the judges check, beyond the task.", wide: true }),
    runs: checked("Runs", input({ type: "number", min: 1, max: 100, value: 3, name: "runs" }),
      { hint: "Per candidate (3 measure a spread): more runs settle a close call; a race can be raced again." }),
    judges: checked("Judges", input({ name: "judges", placeholder: grades.ceiling?.alias || "" }),
      { hint: "Comma-separated, of distinct families; blank: the ceiling model." }),
    candidates: checked("Candidates", input({ name: "candidates" }),
      { hint: "Comma-separated; blank: every model of the grade." }),
    jury_weights: checked("Judges' weights", select([["", "Equal"], ["agreement", "By agreement with people"]], "", { name: "jury_weights" }),
      { hint: "By agreement: each judge counts by its κ against people in its latest judge check (Evidence)." }),
  };
  for (const [name, f] of Object.entries(fields)) f.el.dataset.field = name;
  const status = h("div", { "aria-live": "polite" });
  const start = button("Start", null, { kind: "primary", type: "submit" });
  const form = h("form", { class: "form-grid", "data-testid": "race-form", novalidate: true },
    Object.values(fields).map((f) => f.el), status);
  const send = async (event) => {
    event.preventDefault();
    Object.values(fields).forEach((f) => replace(f.slot));
    replace(status);
    const text = (name) => fields[name].control.value.trim();
    const body = { grade: fields.grade.control.value, prompt: fields.prompt.control.value };
    for (const name of ["system", "rubric"]) if (text(name)) body[name] = text(name);
    if (text("runs")) body.runs = Number(text("runs"));
    for (const name of ["judges", "candidates"]) if (text(name)) body[name] = words(text(name));
    if (text("jury_weights")) body.jury_weights = text("jury_weights");
    start.disabled = true;
    try {
      const race = await api.post("/api/races", body, { signal: ctx.signal });
      close();
      toast(`Race ${race.race} started: ${race.candidates.length} candidate(s), judged by ${race.judges.join(", ")}.`);
      onStarted(race);
    } catch (err) {
      if (isAbort(err)) return;
      const at = fields[err.param];
      replace(at ? at.slot : status, notice("error", at ? null : "Not started", err.message));
      if (at) at.control.focus();
    } finally {
      start.disabled = false;
    }
  };
  form.addEventListener("submit", send);
  start.addEventListener("click", (e) => { e.preventDefault(); form.requestSubmit(); });
  return { body: form, foot: [start] };
}
