// Races: every race of this data folder, newest first, and one race in full: its verdict and
// the test it rests on (a line per candidate: pairs, mean difference, p, Holm's p, what more
// would settle it), a line per model, cost against accuracy as a chart, a row per run with its
// tool difference, each run's transcript and its judgements, with the questions the judges were
// asked exactly as sent (GET /api/races/<id>/judge/<file>, read on demand). A running race is polled (GET /api/races/<id> every 2 s) until it
// ends; every read of the race also redraws its entry in the list, which was read before it (a
// race may end in between). Start a race opens a form (racestart.js). Everything a model, a tool or a caller wrote is shown as text,
// never as markup.

import { api, isAbort, query, seg } from "../api.js";
import { h, replace } from "../dom.js";
import * as fmt from "../format.js";
import { scatter } from "../scatter.js";
import { dataTable } from "../table.js";
import { button, emptyState, loading, modelLink, notice, openDialog, pageHead, timeAgo, toast } from "../ui.js";
import { startRaceButton } from "../racestart.js";

export const title = "Races";
const POLL_MS = 2000;
const PAGE = 50;
const ACCURACY_MAX = 7;
const TOTAL_MAX = 10;
const RESULT = {
  good_enough: ["ok", "good enough"], worse: ["bad", "worse"], undecided: ["warn", "undecided"],
  unjudged: ["warn", "not all judged"], unscored: ["warn", "not all scored"], failed: ["bad", "a run failed"],
  untested: ["", "not tested"],
};

const STATUS = {
  running: ["accent", "running"], done: ["ok", "done"], failed: ["bad", "failed"],
  cancelled: ["warn", "cancelled"], unfinished: ["warn", "unfinished"], unreadable: ["bad", "unreadable"],
};

function statusBadge(status) {
  const [kind, word] = STATUS[status] || ["", status];
  return h("span", { class: ["badge", kind], "data-testid": "race-status" }, word);
}

function num(v, digits = 2) {
  return typeof v === "number" && Number.isFinite(v) ? String(+v.toFixed(digits)) : fmt.DASH;
}

function money(v, currency) {
  if (typeof v !== "number" || !Number.isFinite(v)) return fmt.DASH;
  return `${v === 0 ? "0" : v.toPrecision(3)} ${currency || ""}`.trim();
}


function asText(value) {
  if (typeof value === "string") return value;
  try { return JSON.stringify(value); } catch { return String(value); }
}

// ------------------------------------------------------------------ the tool difference
function differs(diff) {
  return Boolean(diff) && ["skipped", "different", "extra"].some((k) => (diff[k] || []).length);
}

function diffLines(diff) {
  if (!diff) return [];
  return [
    ...(diff.skipped || []).map((d) => `skipped ${d.tool} ${asText(d.arguments)}`),
    ...(diff.different || []).map((d) => `${d.tool} with ${asText(d.run)}, the reference ${asText(d.reference)}`),
    ...(diff.extra || []).map((d) => `extra ${d.tool} ${asText(d.arguments)}`),
  ];
}

function notedLines(diff) {
  if (!diff) return [];
  return [
    ...(diff.equivalent || []).map((d) => `${d.tool} with ${asText(d.run)}, the reference ${asText(d.reference)}: the same result`),
    ...(diff.unused || []).map((d) => `extra ${d.tool} ${asText(d.arguments)}: its result not used`),
  ];
}

function diffCell(row) {
  if (row.role === "reference") return h("span", { class: "faint" }, "the yardstick");
  const diff = row.tool_difference;
  if (!diff) return h("span", { class: "faint" }, "not compared");
  if (!differs(diff)) return h("span", { class: "badge ok" }, "same calls");
  const parts = [["skipped", "skipped"], ["different", "different"], ["extra", "extra"]]
    .filter(([k]) => (diff[k] || []).length).map(([k, word]) => `${diff[k].length} ${word}`);
  return h("span", { class: "diff" }, h("span", { class: "badge warn" }, parts.join(" · ")),
    h("span", { class: "sub", text: diffLines(diff).join("; ") }));
}

// ------------------------------------------------------------------ the transcript
function transcriptView(row) {
  const t = row.transcript || {};
  const items = [];
  for (const e of t.events || []) {
    if (e.kind === "ask") {
      items.push(h("li", { class: "event ask" }, h("div", { class: "event-head", text: "The job sent" }),
        (e.messages || []).map((m) => h("pre", { class: "textblock", text: `[${m.role}] ${m.content}` }))));
    } else if (e.kind === "model") {
      const said = [`Model call ${e.call} · ${e.status}`];
      if (e.tokens && typeof e.tokens.prompt === "number") said.push(`${e.tokens.prompt} in / ${e.tokens.completion} out`);
      if (typeof e.seconds === "number") said.push(fmt.seconds(e.seconds));
      items.push(h("li", { class: ["event", "model", e.error && "failed"] },
        h("div", { class: "event-head", text: said.join(" · ") }),
        e.error ? h("p", { class: "text-bad", text: e.error }) : null,
        e.text ? h("pre", { class: "textblock", text: e.text }) : null,
        (e.tool_calls || []).map((c) => h("pre", { class: "textblock call", text: `calls ${c.tool}(${asText(c.arguments)})` }))));
    } else if (e.kind === "tool") {
      const raised = Object.prototype.hasOwnProperty.call(e, "raised");
      items.push(h("li", { class: ["event", "tool", raised && "failed"] },
        h("div", { class: "event-head", text: `Tool ${e.tool}(${asText(e.arguments)}) ${raised ? "raised" : "returned"}` }),
        h("pre", { class: ["textblock", raised && "text-bad"], text: raised ? e.raised : e.returned })));
    }
  }
  items.push(t.error
    ? h("li", { class: "event end failed" }, h("div", { class: "event-head", text: "The run failed" }), h("pre", { class: "textblock text-bad", text: t.error }))
    : h("li", { class: "event end" }, h("div", { class: "event-head", text: "Final output" }), h("pre", { class: "textblock", text: t.output ?? "" })));
  return h("ol", { class: "transcript", "data-testid": "transcript" }, items);
}

const ORDER_WORDS = { reference_first: "reference shown first", candidate_first: "candidate shown first" };

/** One kept question as the judge received it, and the answer it gave. */
async function showPrompt(slot, race, name, signal) {
  replace(slot, loading("Reading the question…"));
  try {
    const kept = await api.get(`/api/races/${seg(race)}/judge/${seg(name.replace(/^judge\//, ""))}`, { signal });
    const request = kept.request || {};
    const { messages = [], ...params } = request;
    replace(slot,
      h("p", { class: "muted small", text: `Sent to ${kept.judge} (${ORDER_WORDS[kept.order] || kept.order}, ask ${kept.ask}) with ${asText(params)}` }),
      messages.map((m) => h("pre", { class: "textblock", text: `[${m.role}] ${m.content}` })),
      h("div", { class: "event-head", text: `Answer (${kept.status})` }),
      h("pre", { class: "textblock", text: kept.answer ?? kept.error ?? "" }));
  } catch (err) {
    if (err.name !== "AbortError") replace(slot, notice("error", "The question could not be read", err.message));
  }
}

function judgementsView(row, race, signal) {
  const list = row.judgements || [];
  if (!list.length) return null;
  return h("section", { class: "stack", "data-testid": "judgements" }, h("h3", { text: "Judgements" }),
    list.map((j) => {
      const slot = h("div", { class: "stack" });
      const score = j.total == null ? (j.error || "no score") : `${j.total} (accuracy ${j.accuracy}${j.capped_from != null ? `, capped from ${j.capped_from}` : ""}, shown work ${j.shown_work})`;
      return h("div", { class: "judgement" },
        h("p", null, h("strong", { text: `${j.judge} · ${ORDER_WORDS[j.order] || j.order}: ` }), score, j.reason ? ` · ${j.reason}` : ""),
        h("div", { class: "row" }, (j.prompts || []).map((name, i) => button(`Question ${i + 1}`, () => showPrompt(slot, race, name, signal), { small: true, "aria-label": `The question ${j.judge} was asked (${i + 1})` }))),
        slot);
    }));
}

function openTranscript(row, race) {
  const input = /\.input\d+\./.test(row.label || "") ? ` · input ${row.input}` : "";
  const who = row.role === "reference" ? `Reference · ${row.model}${input}` : `${row.model}${input} · run ${row.run}`;
  openDialog({ title: `Transcript: ${who}`, sub: h("span", { class: "mono", text: row.label }), wide: true, label: "Close the transcript" },
    ({ onClose }) => {
      const lines = diffLines(row.tool_difference);
      const noted = notedLines(row.tool_difference);
      const reads = new AbortController();
      onClose(() => reads.abort());
      return {
        body: h("div", { class: "stack" },
          row.role !== "reference" && row.tool_difference
            ? notice(differs(row.tool_difference) ? "warn" : "", "Tool calls against the reference",
              (lines.length ? lines.join("; ") : "The same tool calls, with the same arguments or the same results.")
              + (noted.length ? ` Not counted: ${noted.join("; ")}.` : ""))
            : null,
          row.voided ? notice("warn", "Not judged", row.voided) : null,
          row.reason && !row.voided ? h("p", null, h("strong", { text: "Judge: " }), row.reason) : null,
          judgementsView(row, race, reads.signal),
          transcriptView(row)),
      };
    });
}

// ------------------------------------------------------------------ the chart
/** What the chart draws: mean accuracy (0–7) with the verdict's band, the pinned model's mean
 *  accuracy down to the margin below it; a report written before the verdict's test draws the
 *  judge total with the reference's interval. */
function chartMeasure(report) {
  if ((report.v || 1) >= 2) {
    return { key: "accuracy", top: ACCURACY_MAX, label: "mean accuracy (0–7)", band: report.verdict ? report.verdict.band : null };
  }
  return { key: "total", top: TOTAL_MAX, label: "judge total (0–10)", band: report.verdict ? report.verdict.reference_interval : null };
}

function fitsChart(m, measure) {
  return typeof m.cost === "number" && typeof m[measure.key] === "number";
}

/** Cost per run against the measure, a point per model, for one currency, with its band. */
function costScoreChart(models, currency, measure, width) {
  const shown = models.filter((m) => fitsChart(m, measure) && m.currency === currency).sort((a, b) => a.cost - b.cost);
  return scatter(shown.map((m) => ({
    name: m.model, x: m.cost, y: m[measure.key],
    title: `${m.model}: ${money(m.cost, currency)} a run, ${measure.label} ${num(m[measure.key])}`,
  })), {
    width, yTop: measure.top, band: measure.band,
    xLabel: `cost per run (${currency})`, yLabel: measure.label,
    xFormat: (v) => money(v, ""), yFormat: (v) => num(v, 1),
    label: `Cost per run in ${currency} against ${measure.label}, a point per model`,
  });
}

// ------------------------------------------------------------------ tables
function runsTable(report) {
  const references = report.references && report.references.length ? report.references : [report.reference];
  const several = (report.inputs || []).length > 1;
  const rows = [...references.map((r) => ({ ...r, run: "ref" })), ...(report.rows || [])];
  return dataTable({
    label: "Runs of this race",
    rows,
    // a job raced again holds every look's runs; an earlier look's labels are its own race's
    rowId: (r) => (r.race && r.race !== report.race ? `${r.race}.${r.label}` : r.label),
    filterHint: "Filter by model or reason",
    columns: [
      { key: "model", label: "Model", cell: (r) => h("span", null, modelLink(r.model, { class: "model-link nowrap" }), r.role === "reference" ? h("span", { class: "sub", text: "reference" }) : null) },
      ...(several ? [{ key: "input", label: "Input", numeric: true, filter: false, value: (r) => r.input ?? 1, cell: (r) => String(r.input ?? 1) }] : []),
      ...((report.looks || []).length > 1 ? [{ key: "look", label: "Look", numeric: true, filter: false, value: (r) => r.look ?? 0, cell: (r) => (r.role === "reference" ? fmt.DASH : String(r.look ?? 1)) }] : []),
      { key: "run", label: "Run", numeric: true, filter: false, value: (r) => (r.role === "reference" ? 0 : r.run), cell: (r) => (r.role === "reference" ? "ref" : String(r.run)) },
      { key: "succeeded", label: "OK", filter: false, cell: (r) => (r.succeeded ? h("span", { class: "badge ok" }, "yes") : h("span", { class: "badge bad" }, "no")) },
      { key: "model_calls", label: "Calls", numeric: true, filter: false },
      { key: "tool_calls", label: "Tools", numeric: true, filter: false },
      { key: "tokens", label: "Tokens in / out", numeric: true, filter: false, value: (r) => (r.tokens_in || 0) + (r.tokens_out || 0), cell: (r) => `${fmt.count(r.tokens_in)} / ${fmt.count(r.tokens_out)}` },
      { key: "wall", label: "Time", numeric: true, filter: false, cell: (r) => h("span", null, fmt.seconds(r.wall), h("span", { class: "sub", text: `first answer ${fmt.seconds(r.first_answer)}` })) },
      { key: "cost", label: "Cost", numeric: true, filter: false, cell: (r) => money(r.cost, r.currency) },
      { key: "score", label: "Code score", numeric: true, filter: false, cell: (r) => num(r.score) },
      { key: "accuracy", label: "Accuracy /7", numeric: true, filter: false, cell: (r) => (r.capped_from != null ? h("span", { title: `the judge gave ${r.capped_from}; capped for the tool difference` }, `${r.accuracy} (capped from ${r.capped_from})`) : num(r.accuracy, 0)) },
      { key: "shown_work", label: "Shown work /3", numeric: true, filter: false, cell: (r) => num(r.shown_work, 0) },
      { key: "total", label: "Total /10", numeric: true, filter: false, cell: (r) => (r.voided ? h("span", { class: "badge warn", title: r.voided }, "void") : r.total == null ? fmt.DASH : h("strong", { text: num(r.total) })) },
      { key: "tool_difference", label: "Tools vs reference", filter: false, sortable: false, cell: diffCell },
      { key: "reason", label: "Reason", cell: (r) => h("span", { class: "reason", text: r.reason || r.error || "" }) },
      { key: "transcript", label: "Transcript", sortable: false, filter: false, cell: (r) => button("Open", () => openTranscript(r, r.race || report.race), { small: true, "aria-label": `Transcript of ${r.label}` }) },
    ],
  });
}

function modelsTable(report) {
  return dataTable({
    label: "Models of this race",
    rows: report.models || [],
    rowId: (m) => m.model,
    short: true,
    sort: { key: "accuracy", dir: "desc" },
    columns: [
      { key: "model", label: "Model", cell: (m) => h("span", null, modelLink(m.model, { class: "model-link nowrap" }), m.model === report.pinned ? h("span", { class: "sub", text: "pinned" }) : null) },
      { key: "runs", label: "Runs", numeric: true, filter: false, cell: (m) => `${m.succeeded} of ${m.runs} ok` },
      { key: "judge_failures", label: "Judge failed", numeric: true, filter: false, value: (m) => m.judge_failures ?? 0, cell: (m) => (m.judge_failures ? h("span", { class: "badge warn" }, String(m.judge_failures)) : "0") },
      { key: "voided", label: "Void", numeric: true, filter: false, value: (m) => m.voided ?? 0, cell: (m) => (m.voided ? h("span", { class: "badge warn", title: "runs that named a model, so were not judged" }, String(m.voided)) : "0") },
      { key: "wall", label: "Time", numeric: true, filter: false, cell: (m) => fmt.seconds(m.wall) },
      { key: "cost", label: "Cost per run", numeric: true, filter: false, cell: (m) => money(m.cost, m.currency) },
      { key: "score", label: "Code score", numeric: true, filter: false, cell: (m) => num(m.score) },
      { key: "accuracy", label: "Accuracy /7", numeric: true, filter: false, cell: (m) => h("strong", { text: num(m.accuracy) }) },
      { key: "accuracy_interval", label: "95% interval", filter: false, sortable: false, cell: (m) => span(m.accuracy_interval ?? m.interval) },
      { key: "shown_work", label: "Shown work /3", numeric: true, filter: false, cell: (m) => num(m.shown_work) },
      { key: "total", label: "Total /10", numeric: true, filter: false, cell: (m) => num(m.total) },
    ],
  });
}

function span(pair) {
  return Array.isArray(pair) ? `${num(pair[0])}–${num(pair[1])}` : fmt.DASH;
}

function signed(v) {
  return typeof v === "number" && Number.isFinite(v) ? `${v >= 0 ? "+" : ""}${v.toFixed(2)}` : fmt.DASH;
}

function pValue(v) {
  return typeof v === "number" && Number.isFinite(v) ? String(+v.toPrecision(3)) : fmt.DASH;
}

/** "12 to 40 more runs": the advice is a range (a report written before it was one: "about N"). */
function adviceText(needed) {
  const what = needed.of.replace(/s$/, "");
  if (needed.low == null) return `about ${needed.more} more ${what}(s)`;
  return `${needed.low === needed.high ? needed.low : `${needed.low} to ${needed.high}`} more ${what}(s)`;
}

/** Race again: the job's next look. The server refuses what may not be raced again (409) and says
 *  why; the new race opens once it is accepted. */
function againCard(race, ctx) {
  const report = race.report;
  const job = report && report.job;
  if (!job || job.code || ["running", "unfinished", "unreadable"].includes(race.status)) return null;
  const looks = report.looks || [];
  const slot = h("div", { "aria-live": "polite" });
  const again = button("Race again", async () => {
    again.disabled = true;
    replace(slot);
    try {
      const next = await api.post(`/api/races/${seg(race.race)}/again`, {}, { signal: ctx.signal });
      toast(`Race ${next.race} started: look ${next.look} of this job.`);
      ctx.navigate(`#/races${query({ race: next.race })}`);
    } catch (err) {
      if (!isAbort(err)) replace(slot, notice("error", "Not raced again", err.message));
    } finally {
      again.disabled = false;
    }
  }, { kind: "primary", "data-testid": "race-again" });
  const lines = looks.length > 1 ? h("ol", { class: "small", "data-testid": "race-looks" }, looks.map((l) => h("li", null,
    `Race ${l.race}: added ${l.runs} run(s) a model, tested at ${typeof l.level === "number" ? `${(l.level * 100).toFixed(2)}%` : fmt.DASH}`
    + ` · ${l.model ? `named ${l.model}` : (l.state || fmt.DASH).replace(/_/g, " ")}`))) : null;
  return h("section", { class: "card", "data-testid": "race-again-card" },
    h("h2", { text: looks.length > 1 ? `Look ${looks.length} of this job` : "Race this job again" }),
    h("p", { class: "muted" }, `Racing again adds ${race.runs ?? "as many"} run(s) a model to this job's evidence, and the verdict is taken on every look's runs. `
      + "Each look is tested at its share of the 5% error (1.48% at the first, down to 0.68% at the fifth), so racing again until a model is named still names one that is not good enough at most 5% of the time. A job has at most 5 looks."),
    lines, h("div", { class: "row" }, again), slot);
}

/** What the verdict tested and a line per candidate and measure. */
function verdictTest(verdict) {
  const test = verdict && verdict.test;
  const candidates = (verdict && verdict.candidates) || [];
  if (!test || !candidates.length) return null;
  const measures = test.measures.map((m) => (m === "score" ? "code score (× 10)" : "accuracy (× 10/7)")).join(" and ");
  const margin = `${test.margin} point${test.margin === 1 ? "" : "s"} of 10`;
  const rows = candidates.flatMap((c) => {
    const tests = Object.entries(c.measures || {});
    return (tests.length ? tests : [["–", {}]]).map(([measure, t]) => ({ ...c, measure, t, id: `${c.model}.${measure}` }));
  });
  return h("section", { class: "section", "data-testid": "verdict-test" },
    h("h2", { text: "The verdict's test" }),
    h("p", { class: "muted" }, `A paired, one-sided non-inferiority t test on ${measures}: is each candidate at most ${margin} worse than the pinned model, `
      + `over the same ${test.unit === "input" ? "inputs (a unit per input)" : "input (a run paired with the pinned model's run)"}? `
      + `Alpha ${test.alpha}, Holm's correction across the candidates tested`
      + (test.look ? `; look ${test.look} of ${test.looks} of this job, tested at ${(test.level * 100).toFixed(2)}% (alpha spent over the looks)` : "")
      + ". Shown work is beside it, never tested."),
    dataTable({
      label: "Candidates tested",
      rows,
      rowId: (r) => r.id,
      short: true,
      columns: [
        { key: "model", label: "Model", cell: (r) => h("strong", { class: "nowrap", text: r.model }) },
        { key: "measure", label: "Measure", filter: false },
        { key: "n", label: "Pairs", numeric: true, filter: false, value: (r) => r.t.n ?? -1, cell: (r) => num(r.t.n, 0) },
        { key: "mean", label: "Mean difference", numeric: true, filter: false, value: (r) => r.t.mean ?? -99, cell: (r) => signed(r.t.mean) },
        { key: "lower", label: "Lower bound", numeric: true, filter: false, value: (r) => r.t.lower ?? -99, cell: (r) => signed(r.t.lower) },
        { key: "p", label: "p", numeric: true, filter: false, value: (r) => r.t.p ?? 2, cell: (r) => pValue(r.t.p) },
        { key: "p_holm", label: "Holm p", numeric: true, filter: false, value: (r) => r.p_holm ?? 2, cell: (r) => pValue(r.p_holm) },
        { key: "result", label: "Result", cell: (r) => {
          const [kind, word] = RESULT[r.result] || ["", r.result];
          const more = r.needed ? ` · ${adviceText(r.needed)} would settle it` : "";
          return h("span", null, h("span", { class: ["badge", kind] }, word), h("span", { class: "sub", text: (r.needed ? more : r.why) || "" }));
        } },
      ],
    }).el);
}

function progressCard(race) {
  const p = race.progress || {};
  const models = Object.entries(p.models || {});
  return h("section", { class: "card", "data-testid": "race-progress" },
    h("h2", { text: "Progress" }),
    h("p", { class: "muted" }, `Reference ${race.pinned}: ${p.reference || "running"} · ${fmt.count(p.done)} of ${fmt.count(p.runs)} runs done, ${fmt.count(p.judged)} judged`),
    models.length ? h("ul", { class: "progress-models" }, models.map(([alias, c]) => h("li", null,
      modelLink(alias), ` ${c.done}/${c.runs} runs done${c.failed ? ` (${c.failed} failed)` : ""} · ${c.judged} judged`,
      h("progress", { max: Math.max(1, c.runs), value: c.done, "aria-label": `${alias}: runs done` })))) : null);
}

// ------------------------------------------------------------------ one race
function raceHead(race) {
  const v = (race.report && race.report.verdict) || race.verdict;
  const facts = h("div", { class: "meta" },
    h("span", null, "Grade ", h("strong", { text: race.grade ?? fmt.DASH })),
    h("span", null, "Reference ", h("strong", { text: race.pinned ?? fmt.DASH })),
    h("span", null, (race.judges || []).length > 1 ? "Judges " : "Judge ", h("strong", { text: (race.judges || []).length ? race.judges.join(", ") : (race.ceiling ?? fmt.DASH) })),
    h("span", null, "Runs per model ", h("strong", { text: race.runs ?? fmt.DASH })),
    h("span", null, "Started ", h("strong", null, timeAgo(race.started, { never: fmt.DASH }))),
    h("span", null, "Took ", h("strong", { text: fmt.seconds(race.seconds) })));
  return h("section", { class: "card race-head" },
    h("div", { class: "row spread" }, h("h2", { class: "mono", text: race.race }), statusBadge(race.status)),
    facts,
    v ? notice(v.model ? "" : "warn", v.model ? `Verdict: ${v.model}` : "Verdict: no model", v.why || "") : null,
    ((race.report && race.report.warnings) || []).map((w) => notice("warn", /was raced before/.test(w) ? "This job was raced before" : "The judge may be biased", w)),
    v && v.needed ? h("p", { class: "muted", "data-testid": "verdict-needed" }, `To settle it: ${adviceText(v.needed)}`
      + (v.needed.assumed != null ? ` (assumes a spread of ${v.needed.assumed} points, not yet measured).` : ".")) : null,
    race.error ? notice("error", "What went wrong", race.error) : null);
}

function judgingNote(judging, voided) {
  if (!judging) return null;
  const said = [`Judged at temperature ${judging.temperature}, seed ${judging.seed}, ${judging.orders === "random" ? "in one order drawn per run" : "in both orders"}.`];
  const p = judging.position || {};
  if (typeof p.judgements === "number" && p.judgements) said.push(`The orders disagree on ${p.disagree} of ${p.judgements} judgement pairs (mean difference ${num(p.mean_difference)}).`);
  const a = judging.alpha;
  if (a && a.meaning) said.push(`Jury agreement on accuracy (Krippendorff's α over ${a.units} judged prompts of ${a.runs} runs): ${a.meaning}.`);
  const gone = judging.missing;
  if (gone) said.push(`${gone.judgements} judgement(s) did not come back, on ${gone.runs} run(s): those runs are scored by the judges that answered.`);
  const refused = Object.entries(judging.refused || {});
  if (refused.length) said.push(`Not taken by the endpoint: ${refused.map(([j, ps]) => `${j} (${ps.join(", ")})`).join("; ")}.`);
  if (voided) said.push(`${voided} run(s) named a model and were not judged.`);
  return h("p", { class: "muted small", "data-testid": "judging" }, said.join(" "));
}

function showRace(slot, race, ctx, cleanups) {
  for (const fn of cleanups.splice(0)) fn();
  const report = race.report;
  const parts = [raceHead(race)];
  if (race.status === "running") parts.push(progressCard(race));
  const charts = [];
  if (report) {
    const inputs = report.inputs && report.inputs.length ? report.inputs : [report.task || ""];
    parts.push(h("details", { class: "fold" }, h("summary", null, inputs.length > 1 ? `The ${inputs.length} inputs and the rubric` : "The task and the rubric"),
      h("div", { class: "fold-body stack" },
        ...inputs.map((text, i) => h("pre", { class: "textblock", "data-testid": "race-task", "aria-label": inputs.length > 1 ? `Input ${i + 1}` : null, text })),
        h("pre", { class: "textblock", text: report.rubric || "No rubric beyond the task." }))));
    const models = report.models || [];
    const measure = chartMeasure(report);
    const currencies = [...new Set(models.filter((m) => fitsChart(m, measure)).map((m) => m.currency))];
    const unpriced = models.filter((m) => !fitsChart(m, measure)).map((m) => m.model);
    const chartCards = currencies.map((currency) => {
      const box = h("div", { class: "chart", "data-testid": "cost-score-chart" }, loading("Drawing…"));
      charts.push({ box, currency });
      return box;
    });
    parts.push(h("section", { class: "card chart-card" },
      h("div", null, h("h2", { text: measure.key === "accuracy" ? "Cost against accuracy" : "Cost against judge total" }),
        h("p", { class: "chart-note" }, measure.key === "accuracy"
          ? "A point per model: its mean cost per run and mean accuracy. The band runs from the pinned model's mean accuracy down by the verdict's margin; the verdict itself is the test below, on each model's runs paired with the pinned model's. Currencies are never compared."
          : "A point per model: its mean cost per run and mean judge total. The band is the reference's 95% interval. Currencies are never compared.")),
      chartCards.length ? chartCards : h("p", { class: "muted" }, "No model has both a cost and a judged run to draw."),
      unpriced.length ? h("p", { class: "muted small" }, `Not drawn (no cost or no judged run): ${unpriced.join(", ")}.`) : null));
    const tested = verdictTest(report.verdict);
    if (tested) parts.push(tested);
    const again = againCard(race, ctx);
    if (again) parts.push(again);
    parts.push(h("section", { class: "section" }, h("h2", { text: "Models" }), modelsTable(report).el));
    parts.push(h("section", { class: "section" }, h("h2", { text: "Runs" }),
      h("p", { class: "muted" }, "Every run, the reference first (one per input). Accuracy is capped at 4 when a run's tool calls differ from the reference's, and shown work never makes up for it: the verdict is decided on accuracy. A run's scores are the means of its judgements (every judge, each order); a run that names a model is void, never scored, and, like a judge failure, keeps its model undecided. Open a transcript to read what the run sent, each model call, each tool call, what it returned, and the questions its judges were asked."),
      judgingNote(report.judging, report.voided),
      runsTable(report).el));
  }
  replace(slot, ...parts);

  // drawn at each box's own width (and again when it changes much), so the labels stay legible
  const drawnAt = new Map();
  const draw = () => {
    for (const { box, currency } of charts) {
      const w = Math.round(box.clientWidth);
      if (!w || Math.abs(w - (drawnAt.get(box) || 0)) < 24) continue;
      drawnAt.set(box, w);
      try {
        replace(box, costScoreChart(report.models || [], currency, chartMeasure(report), Math.max(280, w)));
      } catch (err) {
        replace(box, notice("error", "The chart could not be drawn", err.message));
      }
    }
  };
  if (charts.length) {
    const resize = new ResizeObserver(draw);
    for (const { box } of charts) resize.observe(box);
    draw();
    cleanups.push(() => resize.disconnect());
  }
}

// ------------------------------------------------------------------ the page
function raceLink(r, current) {
  const v = r.verdict && r.verdict.model;
  return h("a", {
    class: ["race-item", current && "current"], href: `#/races${query({ race: r.race })}`,
    "aria-current": current ? "true" : null, dataset: { race: r.race },
  },
  h("span", { class: "row spread" }, h("span", { class: "mono", text: r.race }), statusBadge(r.status)),
  h("span", { class: "panel-meta" },
    h("span", null, `grade ${r.grade ?? fmt.DASH}`),
    h("span", null, timeAgo(r.started, { never: fmt.DASH }))),
  h("span", { class: "panel-meta" }, v ? `verdict ${v}` : r.status === "running" ? "running…" : "no verdict"));
}

export async function render(root, ctx) {
  const listing = await api.get(`/api/races${query({ limit: PAGE })}`, { signal: ctx.signal });
  const races = listing.data || [];
  const started = (race) => ctx.navigate(`#/races${query({ race: race.race })}`);
  const head = pageHead("Races", "A race runs a job on the grade's pinned model (the reference), then on every "
    + "candidate of that grade, and has the ceiling model judge each run blind against the reference. "
    + "Here: what each run cost, how it scored, what it called and what it said.", startRaceButton(ctx, started));
  if (!races.length) {
    replace(root, head, emptyState("No race yet",
      "Press Start a race to race a prompt across a grade. A race started elsewhere (the command line, "
      + "POST /bench/race) shows here too, as it runs.", startRaceButton(ctx, started)));
    return;
  }
  const wanted = ctx.params.get("race") || races[0].race;
  const list = h("nav", { class: "race-list", "aria-label": "Races, newest first" },
    races.map((r) => raceLink(r, r.race === wanted)));
  if (listing.next) list.append(h("p", { class: "muted small" }, `The ${races.length} newest races are listed.`));
  const detail = h("div", { class: "race-detail", "aria-live": "polite" }, loading("Loading the race…"));
  replace(root, head, h("div", { class: "race-layout" }, list, detail));

  const cleanups = [];
  ctx.onCleanup(() => cleanups.splice(0).forEach((fn) => fn()));
  let timer = null;
  ctx.onCleanup(() => clearTimeout(timer));
  let race;
  try {
    race = await api.get(`/api/races/${seg(wanted)}`, { signal: ctx.signal });
  } catch (err) {
    if (err.name === "AbortError") throw err;
    replace(detail, notice("error", "This race could not be loaded", err.message));
    return;
  }
  // the list was read first: its entry for this race may be older than the race just read
  const relist = (now) => {
    const item = list.querySelector(`[data-race="${CSS.escape(wanted)}"]`);
    if (item) item.replaceWith(raceLink(now, true));
  };
  showRace(detail, race, ctx, cleanups);
  relist(race);

  // a running race: its progress until it ends, then its report
  const poll = async () => {
    timer = null;
    if (!ctx.active) return;
    try {
      const now = await api.get(`/api/races/${seg(wanted)}`, { signal: ctx.signal });
      if (now.status !== "running" || !document.hidden) showRace(detail, now, ctx, cleanups);
      relist(now);
      if (now.status === "running" && ctx.active) timer = setTimeout(poll, POLL_MS);
    } catch (err) {
      if (err.name === "AbortError") return;
      if (ctx.active) timer = setTimeout(poll, POLL_MS * 2);
    }
  };
  if (race.status === "running") timer = setTimeout(poll, POLL_MS);
}
