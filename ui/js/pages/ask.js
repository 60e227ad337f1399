// Ask: run a collection through this server's /v1/chat/completions with stream: true, show each
// seat's section as it arrives, and once the final chunk brings `bench`, each seat's verdict
// buttons. A person can use the gateway here without any client. A pick reply shows the picked
// seat's answer first (its call named, its tool calls listed), then every seat as it stood.

import { api, isAbort, send } from "../api.js";
import { h, replace } from "../dom.js";
import * as fmt from "../format.js";
import { openSeat } from "../seat.js";
import { sseData } from "../sse.js";
import {
  button, copyButton, emptyState, field, input, linkButton, modelLink, notice, pageHead, seatLabel,
  select, verdictMark, answered } from "../ui.js";
import { quickVerdict } from "../verdict.js";

export const title = "Ask";

// one seat's section in the reply's markdown: "## Seat 1: member1 · alias", then "call `id` · ok · 1.23 s"
const SECTION = /^## Seat (\d+): (\S+) · (.+)\n+call `([^`]+)` · (\w+) · ([\d.]+) s\n*([\s\S]*)$/;

function sectionsOf(text) {
  return text.split(/(?=^## Seat \d+: )/m).map((t) => t.trim()).filter(Boolean);
}

function streamingCard(text) {
  const m = SECTION.exec(text);
  if (!m) {
    return h("article", { class: "card answer-card" }, h("pre", { class: "textblock" }, text));
  }
  const [, , seat, alias, call, status, secs, body] = m;
  return h("article", { class: "card answer-card", dataset: { call } },
    h("div", { class: "answer-head" },
      h("div", null, h("div", { class: "answer-title" }, `${seatLabel({ call, seat })} · `, modelLink(alias, { strong: false })),
        h("div", { class: "meta" }, h("span", { class: "mono", text: call }), h("span", { text: status }), h("span", { text: `${secs} s` })))),
    h("pre", { class: "textblock answer" }, body.trim()));
}

// a seat's tool calls, each as name(arguments): what an agent would run next
function toolCallsBlock(calls) {
  if (!Array.isArray(calls) || !calls.length) return null;
  return h("div", { class: "tool-calls", role: "group", "aria-label": "Tool calls" },
    h("p", { class: "small muted", text: calls.length === 1 ? "Tool call" : `${calls.length} tool calls` }),
    calls.map((c) => {
      const fn = (c && c.function) || {};
      return h("pre", { class: "textblock mono tool-call", text: `${fn.name || "?"}(${fn.arguments || ""})` });
    }));
}

function bodyOf(seat, ok) {
  if (seat.answer) return h("pre", { class: "textblock answer" }, seat.answer);
  if (ok && (seat.tool_calls || []).length) return null;   // its tool calls are the answer
  if (seat.status === "running") {
    return h("p", { class: "muted" }, "Still answering behind the picked reply; its answer will be on Panels.");
  }
  return h("p", { class: "muted" }, ok ? "The answer was empty." : `No answer: ${seat.error || seat.status}.`);
}

function finalCard(seat, signal, heading = null, note = null) {
  const ok = answered(seat);
  const chip = ok ? "ok" : seat.status === "running" ? "" : seat.status === "empty" ? "warn" : "bad";
  const mark = h("span");
  const card = h("article", { class: "card answer-card", dataset: { call: seat.call, seat: seat.seat } },
    h("div", { class: "answer-head" },
      h("div", null,
        h("div", { class: "answer-title" }, `${heading || seatLabel(seat)} · `, modelLink(seat.alias, { strong: false })),
        h("div", { class: "meta" },
          h("span", { class: "mono", text: seat.call }),
          h("span", { class: ["chip", chip] }, seat.status),
          h("span", { text: fmt.seconds(seat.seconds) }))),
      mark),
    note ? h("p", { class: "small pick-note", text: note }) : null,
    bodyOf(seat, ok),
    toolCallsBlock(seat.tool_calls),
    ok ? quickVerdict(seat.call, {
      signal,
      onSaved: (r) => replace(mark, verdictMark(r.verdict ? r.verdict.useful : null)),
      onMore: () => openSeat(seat.call, { title: `${seatLabel(seat)} · ${seat.alias}`, onVerdict: (v) => replace(mark, verdictMark(v ? v.useful : null)) }),
    }) : null);
  return card;
}

export async function render(root, ctx) {
  const [cols, info] = await Promise.all([
    api.get("/api/collections", { signal: ctx.signal }), ctx.info(),
  ]);
  const list = cols.data || [];
  const head = pageHead("Ask", "Ask a collection one question: every seat answers, each answer is labelled "
    + "by model, and you can say right here which answers were useful.");
  if (!list.length) {
    replace(root, head, emptyState("No collection to ask yet",
      "A collection is a named panel of models. Make one, or load the demo roster from the first-run page.",
      linkButton("Make a collection", "#/collections", "primary")));
    return;
  }
  const wanted = ctx.params.get("collection");
  const initial = list.find((c) => c.id === wanted || c.name === wanted) || list[0];
  const collection = select(list.map((c) => [c.id || `bench/${c.name}`, c.id || `bench/${c.name}`]), initial.id || `bench/${initial.name}`);
  const reply = select([["", "As the collection says"], [":all", "Every answer"], [":merged", "One merged answer"],
    [":pick", "One picked answer"]], "");
  const prompt = h("textarea", { class: "prompt", rows: 7, required: true, placeholder: "Paste a diff to review, a design question, anything you would ask one model." });
  const about = h("p", { class: "muted small" });
  // tools offered as an agent would offer them, so a pick reply can be tool calls
  const tools = h("textarea", { class: "mono", rows: 3, placeholder: '[{"type": "function", "function": {"name": "lookup_order", "parameters": {"type": "object"}}}]' });
  const keyBox = input({ type: "password", autocomplete: "off", placeholder: "pk_… made on Settings" });
  const keyField = field("Gateway key", keyBox, { hint: "This server asks callers of /v1 for a gateway key. It is kept only while this page is open." });
  keyField.hidden = !(info && info.auth && (info.auth.token_required || info.auth.keys_required));
  const askBtn = button("Ask", null, { kind: "primary large", type: "submit" });
  const stopBtn = button("Stop", null, { hidden: true });
  const progress = h("div", { class: "progress-line", role: "status", "aria-live": "polite" });
  const results = h("div", { class: "ask-results", "aria-label": "Answers" });
  const summary = h("div");
  const base = (info && info.gateway && info.gateway.base_url) || `${location.origin}/v1`;

  const showAbout = () => {
    const c = list.find((x) => (x.id || `bench/${x.name}`) === collection.value);
    about.textContent = c ? `${c.description || "No description."} ${c.members.length} members + ${c.explorers ?? 0} explorers = ${c.calls ?? c.members.length} calls.` : "";
  };
  collection.addEventListener("change", showAbout);
  showAbout();

  const snippet = () => `from openai import OpenAI\nclient = OpenAI(base_url="${base}", api_key="local")\n`
    + `r = client.chat.completions.create(model="${collection.value}${reply.value}",\n`
    + "    messages=[{\"role\": \"user\", \"content\": \"...\"}])\nprint(r.choices[0].message.content)";
  const code = h("pre", { class: "textblock" }, snippet());
  collection.addEventListener("change", () => { code.textContent = snippet(); });
  reply.addEventListener("change", () => { code.textContent = snippet(); });

  let running = null;
  ctx.onCleanup(() => { if (running) running.abort(); });
  stopBtn.addEventListener("click", () => { if (running) running.abort(); });

  const form = h("form", { class: "card form", novalidate: true, "aria-label": "Ask a collection" },
    h("div", { class: "form-grid" },
      field("Collection", collection),
      field("Reply", reply, { hint: "Merged: one more call writes a single answer saying who said what. Pick: the answer of the member judged most useful, verbatim." }),
      keyField),
    about,
    field("Prompt", prompt, { wide: true }),
    field("Tools", tools, { wide: true, hint: "Optional: a JSON list of tools, as an agent sends them. Needs a pick or merged reply." }),
    h("div", { class: "form-actions" }, progress, stopBtn, askBtn));

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const text = prompt.value.trim();
    if (!text) {
      prompt.setAttribute("aria-invalid", "true");
      replace(summary, notice("error", "Write a prompt first."));
      prompt.focus();
      return;
    }
    prompt.removeAttribute("aria-invalid");
    let offered = null;
    if (tools.value.trim()) {
      try { offered = JSON.parse(tools.value); } catch { offered = null; }
      if (!Array.isArray(offered)) {
        tools.setAttribute("aria-invalid", "true");
        replace(summary, notice("error", "Tools must be a JSON list such as [{\"type\": \"function\", \"function\": {\"name\": \"lookup_order\"}}], or left empty."));
        tools.focus();
        return;
      }
    }
    tools.removeAttribute("aria-invalid");
    const controller = new AbortController();
    running = controller;
    askBtn.disabled = true;
    stopBtn.hidden = false;
    replace(results);
    replace(summary);
    const model = collection.value + reply.value;
    replace(progress, h("span", { class: "spinner", "aria-hidden": "true" }), `Asking ${model}: answers appear as each seat finishes…`);
    let content = "";
    let arrived = 0;
    let bench = null;
    const toolCalls = [];   // a picked answer's tool calls, as the stream sent them
    try {
      const headers = keyBox.value.trim() ? { Authorization: `Bearer ${keyBox.value.trim()}` } : {};
      const response = await send("POST", "/v1/chat/completions",
        { model, stream: true, messages: [{ role: "user", content: text }], ...(offered ? { tools: offered } : {}) },
        { signal: controller.signal, headers: { ...headers, Accept: "text/event-stream" } });
      for await (const data of sseData(response)) {
        if (data === "[DONE]") break;
        let chunk;
        try { chunk = JSON.parse(data); } catch { continue; }
        if (chunk.error) throw new Error(chunk.error.message || "The panel failed after it started.");
        const delta = chunk.choices && chunk.choices[0] && chunk.choices[0].delta;
        if (delta && typeof delta.content === "string" && delta.content) {
          content += delta.content;
          const parts = sectionsOf(content);
          arrived = parts.length;
          replace(results, parts.map(streamingCard));
          replace(progress, h("span", { class: "spinner", "aria-hidden": "true" }),
            `${arrived} ${arrived === 1 ? "answer" : "answers"} in, waiting for the rest…`);
        }
        if (delta && Array.isArray(delta.tool_calls)) toolCalls.push(...delta.tool_calls);
        if (chunk.bench) bench = chunk.bench;
      }
      if (!bench) throw new Error("The stream ended before the panel finished; see Panels for what was recorded.");
      const seats = bench.seats || [];
      const merger = bench.merger ? { ...bench.merger, seat: "merger" } : null;
      const pickedSeat = bench.picked ? seats.find((s) => s.call === bench.picked.call) : null;
      const picked = pickedSeat ? { ...pickedSeat, tool_calls: pickedSeat.tool_calls || toolCalls } : null;
      const first = merger ? finalCard(merger, ctx.signal, answered(merger) ? "Merged answer" : "Merger")
        : picked ? finalCard(picked, ctx.signal, "Picked answer",
          `The reply is ${seatLabel(picked)} ${picked.alias}'s answer, verbatim: call ${picked.call}.`)
          : null;
      replace(results,
        first,
        first ? h("h2", { class: "section", text: "Every seat's answer" }) : null,
        seats.map((s) => finalCard(s, ctx.signal)));
      const okCount = seats.filter((s) => answered(s)).length;
      const behind = seats.filter((s) => s.status === "running").length;
      replace(progress, `Done: ${okCount} of ${seats.length} seats answered in ${fmt.seconds(bench.seconds)}`
        + (behind ? `; ${behind} still answering behind the picked reply.` : "."));
      replace(summary, h("div", { class: "notice" },
        h("div", { class: "grow" },
          h("p", null, "Panel ", h("strong", { class: "mono", text: bench.panel }), ` · ${bench.collection}`,
            bench.shape ? ` · shape ${bench.shape}` : ""),
          bench.note ? h("p", { text: bench.note }) : null,
          (bench.skipped || []).length ? h("p", { class: "muted small" },
            "Not seated: ", bench.skipped.map((x, i) => [i ? "; " : "", modelLink(x.alias, { strong: false }), ` (${x.why})`])) : null,
          (bench.suggest || []).length ? h("p", { class: "small" },
            "Suggestion: ", bench.suggest.map((x, i) => [i ? "; " : "", modelLink(x.alias, { strong: false }),
              " looks more useful than ", modelLink(x.instead_of, { strong: false })]), ".") : null),
        linkButton("See it on Panels", "#/panels", "small")));
    } catch (err) {
      if (isAbort(err)) {
        if (ctx.active) replace(progress, "Stopped. Seats still running were cancelled.");
      } else {
        replace(progress);
        if (err.status === 401) keyField.hidden = false;
        replace(summary, notice("error", "The collection could not answer", err.message));
      }
    } finally {
      running = null;
      askBtn.disabled = false;
      stopBtn.hidden = true;
    }
  });

  replace(root, head,
    h("div", { class: "ask-layout" },
      form,
      summary,
      results,
      h("details", { class: "fold" },
        h("summary", null, "Ask the same from your own code"),
        h("div", { class: "fold-body stack" },
          h("p", { class: "muted" }, "Any OpenAI client works: point it at this server's /v1 and name a collection as the model."),
          code, h("div", { class: "row" }, copyButton(() => code.textContent, "Copy code"))))));
}
