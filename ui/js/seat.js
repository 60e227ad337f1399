// The seat dialog: one call's prompt (as text) and answer (as sanitised Markdown, markdown.js),
// and its verdict form, which shares the call's verdict state with every other view.

import { api, seg } from "./api.js";
import { h, replace } from "./dom.js";
import * as fmt from "./format.js";
import { markdown } from "./markdown.js";
import { copyButton, loading, modelLink, notice, openDialog, seatLabel, answered } from "./ui.js";
import { liveMark, verdictForm } from "./verdict.js";
import { learn } from "./verdictstate.js";

/** Open the call's dialog; onVerdict(verdict) when a verdict is saved. */
export function openSeat(call, { title = null, onVerdict } = {}) {
  const controller = new AbortController();
  openDialog({ title: title || `Seat ${call}`, sub: h("span", { class: "mono", text: call }), wide: true },
    ({ onClose }) => {
      onClose(() => controller.abort());
      const body = h("div", { class: "stack" }, loading("Loading the answer…"));
      fill(body, call, controller.signal, onVerdict);
      return { body };
    });
}

async function fill(body, call, signal, onVerdict) {
  let c;
  try {
    c = await api.get(`/api/calls/${seg(call)}`, { signal });
  } catch (err) {
    if (err.name === "AbortError") return;
    replace(body, notice("error", "This seat could not be loaded", err.message));
    return;
  }
  learn(c.call, c.verdict || null);
  const mark = answered(c) || c.verdict ? liveMark(c.call) : null;
  const facts = h("div", { class: "meta" },
    h("span", null, "Model ", modelLink(c.alias)),
    h("span", null, "Seat ", h("strong", { text: seatLabel(c) })),
    h("span", null, "Status ", h("strong", { text: c.status })),
    h("span", null, "Time ", h("strong", { text: fmt.seconds(c.seconds) })),
    h("span", null, "Panel ", h("strong", { class: "mono", text: c.panel })),
    mark,
    copyButton(() => c.call, "Copy call id"));
  const answer = c.answer
    ? markdown(c.answer, { class: "markdown answer", "data-testid": "answer" })
    : h("p", { class: "muted" }, answered(c) ? "The answer was empty." : "No answer.");
  replace(body,
    facts,
    c.error ? notice("error", `The seat did not answer: ${c.status}`, c.error) : null,
    h("h3", { text: "Answer" }),
    answer,
    c.tool_calls && c.tool_calls.length
      ? h("div", { "data-testid": "tool-calls" },
        h("h3", { text: "Tool calls" }),
        ...c.tool_calls.map((t) => h("pre", { class: "textblock" },
          `${t.function.name}(${t.function.arguments})`)))
      : null,
    h("details", null, h("summary", { text: "Prompt" }), h("pre", { class: "textblock prompt-text" }, c.prompt || "")),
    answered(c) || c.verdict
      ? verdictForm(c.call, c.verdict, {
        signal,
        onSaved: (result) => { if (onVerdict) onVerdict(result.verdict); },
      })
      : h("p", { class: "muted" }, "Only answers take a verdict; this seat gave none."));
}
