// Ask: a comparison flow. The question goes to this server's /api/ask (the panel run for the
// dashboard's own session, so no gateway key is pasted here) with stream: true; each seat's
// section shows as it arrives, and once the final chunk brings `bench`, the answers stand side
// by side (tabs on a narrow screen, compare.js), rendered as sanitised Markdown, each with its
// verdict buttons. Ctrl+Enter (Cmd+Enter) asks; u / n judge the current answer and j goes to the
// next one owed a verdict. A pick reply shows the picked seat's answer first (its call named,
// its tool calls listed), then every seat as it stood; both views of it share one verdict state.

import { api, isAbort, send } from "../api.js";
import { comparison } from "../compare.js";
import { h, newId, replace } from "../dom.js";
import * as fmt from "../format.js";
import { judgingKeys, keysHint } from "../judgekeys.js";
import { markdown } from "../markdown.js";
import { openSeat } from "../seat.js";
import { sseData } from "../sse.js";
import {
  button, checkbox, copyButton, emptyState, field, input, linkButton, modelLink, notice, pageHead, seatLabel,
  select, toast, answered } from "../ui.js";
import { liveMark, quickVerdict } from "../verdict.js";
import { current as verdictOf } from "../verdictstate.js";

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
    markdown(body.trim(), { class: "markdown answer" }));
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

// the models a panel did not seat, folded to a count with a Show button past a few: on a large
// roster almost every model is left out, and their names would push the answers off the page
const NOT_SEATED_SHOWN = 3;

function notSeated(skipped) {
  if (!skipped.length) return null;
  const names = (list) => list.map((x, i) => [i ? "; " : "", modelLink(x.alias, { strong: false }), ` (${x.why})`]);
  if (skipped.length <= NOT_SEATED_SHOWN) {
    return h("p", { class: "muted small", "data-testid": "not-seated" }, "Not seated: ", names(skipped));
  }
  const list = h("p", { class: "muted small", hidden: true, id: newId("not-seated") }, names(skipped));
  const show = button("Show", () => {
    list.hidden = !list.hidden;
    show.textContent = list.hidden ? "Show" : "Hide";
    show.setAttribute("aria-expanded", String(!list.hidden));
  }, { small: true, kind: "ghost", "aria-expanded": "false", "aria-controls": list.id });
  return h("div", { "data-testid": "not-seated" },
    h("p", { class: "muted small row" }, `Not seated: ${fmt.plural(skipped.length, "model")}`, show), list);
}

function bodyOf(seat, ok) {
  if (seat.answer) return markdown(seat.answer, { class: "markdown answer" });
  if (ok && (seat.tool_calls || []).length) return null;   // its tool calls are the answer
  if (seat.status === "running") {
    return h("p", { class: "muted" }, "Still answering behind the picked reply; its answer will be on Panels.");
  }
  return h("p", { class: "muted" }, ok ? "The answer was empty." : `No answer: ${seat.error || seat.status}.`);
}

function finalCard(seat, signal, heading = null, note = null) {
  const ok = answered(seat);
  const chip = ok ? "ok" : seat.status === "running" ? "" : seat.status === "empty" ? "warn" : "bad";
  const card = h("article", { class: "card answer-card", tabindex: "-1", dataset: { call: seat.call, seat: seat.seat } },
    h("div", { class: "answer-head" },
      h("div", null,
        h("div", { class: "answer-title" }, `${heading || seatLabel(seat)} · `, modelLink(seat.alias, { strong: false })),
        h("div", { class: "meta" },
          h("span", { class: "mono", text: seat.call }),
          h("span", { class: ["chip", chip] }, seat.status),
          h("span", { text: fmt.seconds(seat.seconds) }))),
      ok ? liveMark(seat.call) : null),
    note ? h("p", { class: "small pick-note", text: note }) : null,
    bodyOf(seat, ok),
    toolCallsBlock(seat.tool_calls),
    ok ? quickVerdict(seat.call, {
      signal,
      onMore: () => openSeat(seat.call, { title: `${seatLabel(seat)} · ${seat.alias}` }),
    }) : null);
  return card;
}

export async function render(root, ctx) {
  const [cols, info, roster] = await Promise.all([
    api.get("/api/collections", { signal: ctx.signal }), ctx.info(),
    api.get("/api/models", { signal: ctx.signal }),
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
  const about = h("p", { class: "muted small collection-about" });
  // 2 to 4 roster models asked in place of the collection's members (any models, typed as
  // aliases: a list of every model would be hundreds of options on a large roster)
  const aliases = h("datalist", { id: "ask-aliases" },
    ...(roster.data || []).map((m) => h("option", { value: m.alias })));
  const models = input({ list: "ask-aliases", placeholder: "e.g. fast, slow" });
  const explorersOff = checkbox("No explorers for this ask");
  // tools offered as an agent would offer them, so a pick reply can be tool calls
  const tools = h("textarea", { class: "mono", rows: 3, placeholder: '[{"type": "function", "function": {"name": "lookup_order", "parameters": {"type": "object"}}}]' });
  const askBtn = button("Ask", null, { kind: "primary large", type: "submit", "aria-keyshortcuts": "Control+Enter Meta+Enter" });
  const stopBtn = button("Stop", null, { hidden: true });
  const progress = h("div", { class: "progress-line", role: "status", "aria-live": "polite" });
  const results = h("div", { class: "ask-results", "aria-label": "Answers" });
  const summary = h("div");
  const base = (info && info.gateway && info.gateway.base_url) || `${location.origin}/v1`;

  const showAbout = () => {
    const c = list.find((x) => (x.id || `bench/${x.name}`) === collection.value);
    // the description and the sum on lines of their own: the sum is no part of its sentence
    replace(about, ...(c ? [fmt.sentence(c.description || "No description"),
      h("span", { class: "calls-sum", text: `Each question: ${c.members.length} members + ${c.explorers ?? 0} explorers = ${c.calls ?? c.members.length} calls.` })] : []));
  };
  collection.addEventListener("change", showAbout);
  showAbout();

  const snippet = () => `from openai import OpenAI\nclient = OpenAI(base_url="${base}", api_key="local")\n`
    + `r = client.chat.completions.create(model="${collection.value}${reply.value}",\n`
    + "    messages=[{\"role\": \"user\", \"content\": \"...\"}])\nprint(r.choices[0].message.content)";
  const code = h("pre", { class: "textblock" }, snippet());
  collection.addEventListener("change", () => { code.textContent = snippet(); });
  reply.addEventListener("change", () => { code.textContent = snippet(); });

  // the answers come into view as they arrive (the form stays a scroll away), unless the
  // person already scrolled to them or past them
  const bringAnswersIntoView = () => {
    const top = results.getBoundingClientRect().top;
    if (top > window.innerHeight * 0.6) results.scrollIntoView({ block: "start", behavior: "smooth" });
  };

  let running = null;
  ctx.onCleanup(() => { if (running) running.abort(); });
  stopBtn.addEventListener("click", () => { if (running) running.abort(); });

  const form = h("form", { class: "card form", novalidate: true, "aria-label": "Ask a collection" },
    h("div", { class: "form-grid" },
      field("Collection", collection),
      field("Reply", reply, { hint: "Merged: one more call writes a single answer saying who said what. Pick: the answer of the member judged most useful, verbatim." })),
    about,
    h("div", { class: "form-grid" },
      field("Models", models, { hint: "Optional: 2 to 4 model aliases, comma-separated, asked instead of the collection's members. With no explorers too, exactly those models are asked." }),
      h("div", { class: "field" }, explorersOff.el)),
    aliases,
    field("Prompt", prompt, { wide: true }),
    field("Tools", tools, { wide: true, hint: "Optional: a JSON list of tools, as an agent sends them. Needs a pick or merged reply." }),
    h("div", { class: "form-actions" }, progress, h("span", { class: "keys-hint small muted" }, h("kbd", { text: "Ctrl" }), "+", h("kbd", { text: "Enter" }), " asks"), stopBtn, askBtn));

  // Ctrl+Enter (Cmd+Enter on a Mac) asks from anywhere in the form, the prompt included
  form.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey) && !askBtn.disabled) {
      event.preventDefault();
      form.requestSubmit(askBtn);
    }
  });

  // the judging keys act on the current answer: the one holding the focus, else the chosen tab
  let view = null;   // the comparison of the last finished panel
  const judgeable = () => [...results.querySelectorAll(".answer-card[data-call]")]
    .filter((c) => c.querySelector(".verdict-row"));
  const currentCard = () => {
    const cards = judgeable();
    const focused = document.activeElement && document.activeElement.closest
      ? document.activeElement.closest(".answer-card") : null;
    return cards.find((c) => c === focused) || cards.find((c) => c.classList.contains("is-current")) || cards[0] || null;
  };
  const press = (name) => () => {
    const card = currentCard();
    const btn = card && [...card.querySelectorAll(".verdict-row button")].find((b) => b.textContent === name);
    if (btn && !btn.disabled) btn.click();
  };
  judgingKeys(ctx, {
    u: press("Useful"),
    n: press("Not useful"),
    j: () => {
      const cards = judgeable();
      if (!cards.length) return;
      const at = Math.max(0, cards.indexOf(currentCard()));
      const order = [...cards.slice(at + 1), ...cards.slice(0, at + 1)];
      const next = order.find((c) => !verdictOf(c.dataset.call)) || null;
      if (!next) { toast("Every answer here has a verdict."); return; }
      if (view && view.index(next) >= 0) view.select(view.index(next));
      next.focus();
      next.scrollIntoView({ block: "nearest" });
    },
  });

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
    const chosen = models.value.split(",").map((a) => a.trim()).filter(Boolean);
    const choice = { ...(chosen.length ? { models: chosen } : {}),
      ...(explorersOff.box.checked ? { explorers: 0 } : {}) };
    const controller = new AbortController();
    running = controller;
    askBtn.disabled = true;
    stopBtn.hidden = false;
    replace(results);
    replace(summary);
    view = null;

    const model = collection.value + reply.value;
    replace(progress, h("span", { class: "spinner", "aria-hidden": "true" }), `Asking ${model}: answers appear as each seat finishes…`);
    let content = "";
    let arrived = 0;
    let bench = null;
    const toolCalls = [];   // a picked answer's tool calls, as the stream sent them
    try {
      const response = await send("POST", "/api/ask",
        { model, stream: true, messages: [{ role: "user", content: text }], ...(offered ? { tools: offered } : {}), ...choice },
        { signal: controller.signal, headers: { Accept: "text/event-stream" } });
      for await (const data of sseData(response)) {
        if (data === "[DONE]") break;
        let chunk;
        try { chunk = JSON.parse(data); } catch { continue; }
        if (chunk.error) throw new Error(chunk.error.message || "The panel failed after it started.");
        const delta = chunk.choices && chunk.choices[0] && chunk.choices[0].delta;
        if (delta && typeof delta.content === "string" && delta.content) {
          content += delta.content;
          const parts = sectionsOf(content);
          const first = !arrived;
          arrived = parts.length;
          replace(results, h("div", { class: "compare-grid" }, parts.map(streamingCard)));
          if (first) bringAnswersIntoView();
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
      const cards = seats.map((s) => finalCard(s, ctx.signal));
      view = comparison(cards, { label: "Seats' answers", names: seats.map((s) => `${seatLabel(s)} · ${s.alias}`) });
      replace(results,
        first,
        first ? h("h2", { class: "section", text: "Every seat's answer" }) : null,
        keysHint(),
        view.el);
      bringAnswersIntoView();
      // the focus goes to the first answer, so u / n / j act at once, unless it was moved
      // away from the form while the panel ran
      const at = document.activeElement;
      if (!at || at === document.body || form.contains(at)) {
        const target = judgeable()[0] || results.querySelector(".answer-card[tabindex]");
        if (target) target.focus({ preventScroll: true });
      }
      const okCount = seats.filter((s) => answered(s)).length;
      const behind = seats.filter((s) => s.status === "running").length;
      replace(progress, `Done: ${okCount} of ${seats.length} seats answered in ${fmt.seconds(bench.seconds)}`
        + (behind ? `; ${behind} still answering behind the picked reply.` : "."));
      replace(summary, h("div", { class: "notice" },
        h("div", { class: "grow" },
          h("p", null, "Panel ", h("strong", { class: "mono", text: bench.panel }), ` · ${bench.collection}`,
            bench.shape ? ` · shape ${bench.shape}` : ""),
          bench.note ? h("p", { text: bench.note }) : null,
          notSeated(bench.skipped || []),
          (bench.suggest || []).length ? h("p", { class: "small" },
            "Suggestion: ", bench.suggest.map((x, i) => [i ? "; " : "", modelLink(x.alias, { strong: false }),
              " looks more useful than ", modelLink(x.instead_of, { strong: false })]), ".") : null),
        linkButton("See it on Panels", "#/panels", "small")));
    } catch (err) {
      if (isAbort(err)) {
        if (ctx.active) replace(progress, "Stopped. Seats still running were cancelled.");
      } else {
        replace(progress);
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
