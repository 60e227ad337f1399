// Run the review suite from the page, as `panelist suite run` does: pick the models and tasks,
// the epochs, and whether the demo's scripted models answer (offline). POST /api/suite/run starts
// it in the server's background (one at a time), so closing the page stops nothing; the panel
// shows the run's progress from GET /api/suite/run, read again every second while it runs, and
// calls `onEnded` once a run it watched has ended, so the page can show the new results.

import { api, isAbort } from "./api.js";
import { h, replace } from "./dom.js";
import * as fmt from "./format.js";
import { button, checkbox, field, input, notice, openDialog, toast } from "./ui.js";

const POLL_MS = 1000;
const ENDED = {
  done: ["ok", "Done"], interrupted: ["warn", "Stopped"], failed: ["bad", "Failed"], cancelled: ["warn", "Cancelled"],
};

function runView(run) {
  if (!run || run.status === "none") return null;
  const p = run.progress || {};
  const planned = p.planned;
  if (run.status === "running") {
    const lines = Object.entries(run.totals || {}).map(([alias, total]) => h("li", null,
      h("span", { class: "row spread" }, h("span", { class: "mono", text: alias }), `${(run.done || {})[alias] || 0}/${total}`),
      h("progress", { max: Math.max(1, total), value: (run.done || {})[alias] || 0, "aria-label": `${alias}: samples asked` })));
    return h("div", { class: "notice", role: "status", "data-testid": "suite-run", "data-status": run.status },
      h("div", { class: "grow" },
        h("p", { class: "notice-title", text: planned == null ? "The suite is starting…"
          : `The suite is running: ${fmt.count(p.done)} of ${fmt.count(planned)} samples asked` }),
        planned == null ? null : h("progress", { max: Math.max(1, planned), value: p.done, "aria-label": "Samples asked" }),
        lines.length ? h("ul", { class: "progress-models" }, lines) : null));
  }
  const [kind, word] = ENDED[run.status] || ["", run.status];
  const s = run.summary;
  const said = s
    ? `${fmt.count(s.asked)} asked, ${fmt.count(s.skipped)} already done, ${fmt.count(s.failed)} failed on the way to the model`
      + (s.failed ? " (run it again to ask them again)" : "") + "."
    : run.error || "";
  return h("div", { class: ["notice", kind === "bad" && "error"], role: "status", "data-testid": "suite-run", "data-status": run.status },
    h("div", { class: "grow" },
      h("p", { class: "notice-title", text: `${word}: the suite run of ${run.models.join(", ")}` }),
      h("p", { text: said })));
}

/** The suite run panel: a Run the suite button and the state of the run there is. */
export function suiteRunPanel(ctx, { onEnded = () => {} } = {}) {
  const slot = h("div", { "aria-live": "polite" });
  const runButton = button("Run the suite", () => openForm(), { kind: "primary", "data-testid": "run-suite" });
  const el = h("div", { class: "stack" }, h("div", { class: "row" }, runButton), slot);
  let timer = null;
  let watching = false;
  ctx.onCleanup(() => clearTimeout(timer));

  async function look() {
    timer = null;
    let run;
    try {
      run = await api.get("/api/suite/run", { signal: ctx.signal });
    } catch (err) {
      if (isAbort(err) || !ctx.active) return;
      timer = setTimeout(look, POLL_MS * 2);
      return;
    }
    if (!ctx.active) return;
    replace(slot, runView(run));
    runButton.disabled = run.status === "running";
    if (run.status === "running") {
      watching = true;
      timer = setTimeout(look, POLL_MS);
    } else if (watching) {
      watching = false;
      onEnded(run);
    }
  }

  async function openForm() {
    let models, tasks;
    try {
      [models, tasks] = await Promise.all([api.get("/api/models", { signal: ctx.signal }),
        api.get("/api/suite/tasks", { signal: ctx.signal })]);
    } catch (err) {
      if (!isAbort(err)) toast(`The models or tasks could not be read: ${err.message}`, { kind: "error" });
      return;
    }
    openDialog({ title: "Run the suite", sub: "Each chosen model is asked each chosen task; what a model was asked "
      + "before (the same task, epoch and settings) is not asked again." },
    ({ close }) => suiteForm(models.data || [], tasks.data || [], close, () => { watching = true; look(); }, ctx));
  }

  look();
  return el;
}

function choices(legend, items, testid) {
  const boxes = items.map(([value, label, on]) => ({ value, ...checkbox(label, { value, checked: on }) }));
  const el = h("fieldset", { "data-testid": testid }, h("legend", { text: legend }),
    h("div", { class: "choices" }, boxes.map((b) => b.el)));
  return { el, picked: () => boxes.filter((b) => b.box.checked).map((b) => b.value) };
}

function suiteForm(models, tasks, close, onStarted, ctx) {
  const callable = models.filter((m) => !m.retired);
  const demoRoster = callable.some((m) => m.endpoint === "demo");
  const modelBoxes = choices("Models", callable.map((m) => [m.alias, m.alias, true]), "suite-models");
  const taskBoxes = choices("Tasks", tasks.map((t) => [t.id, t.draft ? `${t.id} (draft)` : t.id, !t.draft]), "suite-tasks");
  const epochs = input({ type: "number", min: 1, max: 100, value: 1 });
  const demo = checkbox("Simulated answers: the demo's scripted models answer, offline", { checked: demoRoster });
  const status = h("div", { "aria-live": "polite" });
  const start = button("Run", async () => {
    replace(status);
    start.disabled = true;
    try {
      const body = { models: modelBoxes.picked(), tasks: taskBoxes.picked(), epochs: Number(epochs.value || 1) };
      if (demo.box.checked) body.demo = true;
      const run = await api.post("/api/suite/run", body, { signal: ctx.signal });
      close();
      toast(`The suite is running on ${run.models.join(", ")} (${fmt.plural(run.tasks.length, "task")}).`);
      onStarted(run);
    } catch (err) {
      if (!isAbort(err)) replace(status, notice("error", "Not started", err.message));
    } finally {
      start.disabled = false;
    }
  }, { kind: "primary", "data-testid": "suite-start" });
  const taskFold = h("details", { class: "fold" },
    h("summary", null, `Tasks: ${fmt.plural(tasks.filter((t) => !t.draft).length, "task")} (drafts only when ticked)`),
    taskBoxes.el);
  return {
    body: h("div", { class: "stack" }, modelBoxes.el, taskFold,
      field("Epochs", epochs, { hint: "How many times each task is asked." }),
      demoRoster ? demo.el : null, status),
    foot: [start],
  };
}
