// Owed verdicts: the answers callers received that nobody has judged yet, oldest first or by
// the value of a verdict (GET /api/owed?order=oldest|value; by value each shows its reason), worked through with the keyboard: u useful, n not useful (each records the
// verdict and moves on), j next without judging. The current answer shows beside the queue, its
// prompt as text and its answer as sanitised Markdown; every mark shares the one verdict state.

import { api, isAbort, query, seg } from "../api.js";
import { h, replace } from "../dom.js";
import * as fmt from "../format.js";
import { judgingKeys, keysHint } from "../judgekeys.js";
import { markdown } from "../markdown.js";
import { openSeat } from "../seat.js";
import { button, emptyState, linkButton, loading, modelLink, notice, pageHead, seatLabel, timeAgo } from "../ui.js";
import { savedWords, liveMark } from "../verdict.js";
import { current as verdictOf, judge, learn } from "../verdictstate.js";

export const title = "Owed verdicts";
const BATCH = 100;

export async function render(root, ctx) {
  let rows = [];
  let order = "oldest";
  const countLine = h("span", { class: "badge warn", "data-testid": "owed-total" });
  const list = h("ol", { class: "owed-list plain", "aria-label": "Owed verdicts, oldest first" });
  const detail = h("div", { class: "owed-detail" });
  const status = h("p", { class: "small", role: "status", "aria-live": "polite" });
  let at = -1;            // the index of the current row
  let loader = null;      // the current answer's request
  let busy = false;
  ctx.onCleanup(() => { if (loader) loader.abort(); });

  function showCount(owed) {
    countLine.hidden = !owed;
    countLine.textContent = `${fmt.count(owed)} ${owed === 1 ? "verdict" : "verdicts"} owed`;
    ctx.setOwed(owed);
  }

  function recount() {
    ctx.refreshInfo().then((info) => { if (info && ctx.active) showCount(info.counts.owed); }, () => {});
  }

  async function fetchRows() {
    const body = await api.get(`/api/owed${query({ limit: BATCH, order })}`, { signal: ctx.signal });
    showCount(body.owed || 0);
    for (const r of body.data || []) learn(r.call, null);
    return body.data || [];
  }

  function item(r, i) {
    return h("li", { dataset: { call: r.call } },
      h("button", {
        type: "button", class: "owed-item", "aria-current": i === at ? "true" : null,
        on: { click: () => show(i) },
      },
      h("span", { class: "owed-alias", text: r.alias || "?" }),
      liveMark(r.call, null),
      h("span", { class: "owed-meta muted small" }, `${r.collection || ""} · `, timeAgo(r.ts)),
      r.reason ? h("span", { class: "owed-reason muted small", text: r.reason }) : null));
  }

  function drawList() {
    replace(list, rows.map(item));
  }

  async function show(i) {
    at = i;
    for (const [k, li] of [...list.children].entries()) {
      const b = li.querySelector("button");
      if (k === i) b.setAttribute("aria-current", "true");
      else b.removeAttribute("aria-current");
    }
    const r = rows[i];
    if (loader) loader.abort();
    loader = new AbortController();
    const signal = loader.signal;
    replace(detail, loading("Loading the answer…"));
    let c;
    try {
      c = await api.get(`/api/calls/${seg(r.call)}`, { signal });
    } catch (err) {
      if (isAbort(err)) return;
      replace(detail, notice("error", "This answer could not be loaded", err.message));
      return;
    }
    const yes = button("Useful", () => decide(true), { kind: "ok-choice", "aria-keyshortcuts": "u" });
    const no = button("Not useful", () => decide(false), { kind: "bad-choice", "aria-keyshortcuts": "n" });
    const next = button("Next", () => advance(), { "aria-keyshortcuts": "j" });
    replace(detail, h("article", { class: "card answer-card", dataset: { call: c.call }, "aria-label": `Answer ${c.call}` },
      h("div", { class: "answer-head" },
        h("div", null,
          h("h2", { class: "answer-title" }, `${seatLabel(c)} · `, modelLink(c.alias, { strong: false })),
          h("div", { class: "meta" },
            h("span", { class: "mono", text: c.call }),
            h("span", { text: c.collection || "" }),
            h("span", null, timeAgo(r.ts)),
            h("span", { text: fmt.seconds(c.seconds) }))),
        liveMark(c.call)),
      h("details", { class: "owed-prompt", open: true }, h("summary", { text: "Prompt" }),
        h("pre", { class: "textblock prompt-text" }, c.prompt || "")),
      h("h3", { text: "Answer" }),
      c.answer ? markdown(c.answer, { class: "markdown answer" }) : h("p", { class: "muted", text: "The answer was only tool calls." }),
      h("div", { class: "verdict-row", role: "group", "aria-label": `Verdict for ${c.call}` },
        yes, no, next,
        button("Add a note or claims…", () => openSeat(c.call, {
          title: `${seatLabel(c)} · ${c.alias}`, onVerdict: recount }), { kind: "ghost", small: true })),
      status));
  }

  // the next row after the current one still owed here (wrapping), or -1
  function nextOwed() {
    for (let k = 1; k <= rows.length; k += 1) {
      const i = (at + k) % rows.length;
      if (!verdictOf(rows[i].call)) return i;
    }
    return -1;
  }

  async function advance() {
    const i = nextOwed();
    if (i >= 0) { show(i); return; }
    // this batch is judged: the server may hold more
    try {
      rows = await fetchRows();
    } catch (err) {
      if (!isAbort(err)) replace(status, `Could not load more: ${err.message}`);
      return;
    }
    if (!rows.length) { finished(); return; }
    at = -1;
    drawList();
    show(0);
  }

  async function decide(useful) {
    if (busy || at < 0) return;
    const r = rows[at];
    busy = true;
    try {
      const result = await judge(r.call, useful, null, ctx.signal);
      status.textContent = savedWords(result);
      recount();
      await advance();
    } catch (err) {
      if (!isAbort(err)) status.textContent = `Not saved: ${err.message}`;
    } finally {
      busy = false;
    }
  }

  function finished() {
    replace(root, head, emptyState("No verdict owed",
      "Every answer a caller received has a verdict. New ones appear here, oldest first, as panels run.",
      linkButton("Ask a collection", "#/ask", "primary"), linkButton("See the panels", "#/panels")));
  }

  judgingKeys(ctx, {
    u: () => decide(true),
    n: () => decide(false),
    j: () => { if (rows.length && !busy) advance(); },
  });

  // oldest first, or the verdicts that could most move a pending swap first
  const orders = [["oldest", "Oldest first"], ["value", "By value"]].map(([value, label]) =>
    button(label, () => reorder(value), { small: true, kind: "ghost", "aria-pressed": String(value === order),
      dataset: { order: value } }));
  async function reorder(value) {
    if (value === order || busy) return;
    order = value;
    for (const b of orders) b.setAttribute("aria-pressed", String(b.dataset.order === order));
    list.setAttribute("aria-label", order === "value" ? "Owed verdicts, by value" : "Owed verdicts, oldest first");
    try {
      rows = await fetchRows();
    } catch (err) {
      if (!isAbort(err)) status.textContent = `Could not load: ${err.message}`;
      return;
    }
    if (!rows.length) { finished(); return; }
    at = -1;
    drawList();
    show(0);
  }
  const head = pageHead("Owed verdicts", "Answers callers received that nobody has judged yet, oldest "
    + "first or by value (the verdicts that could decide a swap first). Judging them is what makes "
    + "the useful rates, and so the seating, worth anything.", countLine,
    h("span", { class: "owed-order", role: "group", "aria-label": "Order" }, orders));
  rows = await fetchRows();
  if (!rows.length) { finished(); return; }
  replace(root, head, keysHint(),
    h("div", { class: "owed-layout" }, h("div", { class: "owed-queue" }, list), detail));
  at = 0;
  drawList();
  show(0);
}
