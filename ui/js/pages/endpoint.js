// An endpoint's page (#/endpoints/NAME), from GET /api/endpoints/{name}/health: whether it
// fails as a whole, its call limits in use and its pause, a Test (one real call listing its
// models), its models with their last day's figures (each linked to its page), and its seats,
// error rate and answer times over time (series.js). Endpoints & models links each row here.

import { api, seg } from "../api.js";
import { h, replace } from "../dom.js";
import * as fmt from "../format.js";
import { seriesSection } from "../series.js";
import { button, emptyState, linkButton, modelLink, notice, pageHead, sectionHead } from "../ui.js";

export const title = "Endpoint";

function stat(label, value, { attention = false } = {}) {
  return h("div", { class: ["stat", attention && "attention"] },
    h("div", { class: "stat-value", text: value }), h("div", { class: "stat-label", text: label }));
}

function limitText(l) {
  if (!l) return "no limit";
  const parts = [];
  if (l.max_concurrent) parts.push(`${fmt.count(l.running ?? 0)} of ${fmt.count(l.max_concurrent)} calls at once`);
  if (l.rpm) parts.push(`${fmt.count(l.admitted_last_window ?? 0)} of ${fmt.count(l.rpm)} calls this minute`);
  return parts.length ? parts.join(" · ") : "no limit";
}

function testSaid(result) {
  if (result.ok) {
    const listed = Array.isArray(result.models) ? ` It lists ${fmt.plural(result.models.length, "model")}.` : "";
    return notice("ok", `It answered ${result.status || ""} in ${fmt.seconds(result.seconds)}.`, `The endpoint can be reached and its key is taken.${listed}`);
  }
  return notice("error", result.status ? `Test failed (${result.status})` : "Test failed: no answer",
    fmt.sentence(result.error || "The endpoint did not answer."));
}

function modelsTable(models) {
  if (!models.length) return emptyState("No model on it yet", "Find what it serves on Endpoints & models and add it in one click.",
    linkButton("Endpoints & models", "#/endpoints"));
  const head = [["Model"], ["Status"], ["Seats (day)", true], ["Error rate", true], ["p50", true], ["p95", true], ["Its limits"]];
  return h("div", { class: "table-wrap", role: "region", "aria-label": "Its models", tabindex: "0" },
    h("table", null,
      h("thead", null, h("tr", null, head.map(([t, numeric]) => h("th", { scope: "col", class: numeric ? "numeric" : null, text: t })))),
      h("tbody", null, models.map((m) => h("tr", { dataset: { alias: m.alias } },
        h("td", null, modelLink(m.alias)),
        h("td", null, m.retired ? h("span", { class: "badge outline", text: "retired" })
          : m.failing ? h("span", { class: "badge bad", title: m.failing.why, text: `failing (${m.failing.kind})` })
            : h("span", { class: "muted", text: m.seats ? "answering" : "no seat today" })),
        h("td", { class: "numeric", text: fmt.count(m.seats) }),
        h("td", { class: "numeric", text: m.error_rate === null ? fmt.DASH : fmt.percent(m.error_rate) }),
        h("td", { class: "numeric", text: fmt.seconds(m.p50) }),
        h("td", { class: "numeric", text: fmt.seconds(m.p95) }),
        h("td", { text: m.limits ? limitText(m.limits) : "the endpoint's" }))))));
}

export async function render(root, ctx) {
  const name = ctx.path[0] || "";
  let ep;
  try {
    ep = await api.get(`/api/endpoints/${seg(name)}/health`, { signal: ctx.signal });
  } catch (err) {
    if (err.status !== 404) throw err;
    replace(root, emptyState(`No endpoint ${name}`, err.message, linkButton("Endpoints & models", "#/endpoints", "primary")));
    return;
  }
  document.title = `${name} · Panelist`;
  const said = h("div", { "aria-live": "polite" });
  const test = button("Test", async () => {
    test.disabled = true;
    replace(said, h("p", { class: "muted", text: `Asking ${ep.base_url}…` }));
    try {
      const body = { name: ep.name, base_url: ep.base_url };
      if (ep.key_env) body.key_env = ep.key_env;
      replace(said, testSaid(await api.post("/api/endpoints/test", body, { signal: ctx.signal })));
    } catch (err) {
      if (err.name !== "AbortError") replace(said, notice("error", "Test refused", err.message));
    } finally {
      test.disabled = false;
    }
  }, { kind: "primary", "aria-label": `Test ${name}`, title: "One real call: list the models it serves" });
  const models = ep.models || [];
  const failing = models.filter((m) => m.failing).length;
  const lim = ep.limits || {};
  const pause = lim.paused;
  replace(root,
    pageHead(`Endpoint ${name}`, `${ep.base_url} · key from ${ep.key_env || "no variable"} (${ep.key_refused ? "not read" : ep.key_set ? "set" : "not set"})`,
      test, linkButton("All endpoints", "#/endpoints")),
    said,
    ep.failing ? notice("error", "Failing as a whole", `${fmt.sentence(ep.failing.why)} Test it to read its answer, then fix its key, address or certificate.`) : null,
    pause ? notice("", `Paused for ${fmt.seconds(pause.seconds_left)}`, fmt.sentence(pause.why || "An upstream asked it to slow down.")) : null,
    h("div", { class: "stats", "data-testid": "endpoint-stats" },
      stat("models", fmt.count(models.length)),
      stat("failing now", fmt.count(failing), { attention: failing > 0 }),
      stat("calls at once", lim.max_concurrent ? `${fmt.count(lim.running ?? 0)} of ${fmt.count(lim.max_concurrent)}` : "no limit"),
      stat("calls this minute", lim.rpm ? `${fmt.count(lim.admitted_last_window ?? 0)} of ${fmt.count(lim.rpm)}` : "no limit"),
      stat("paused", pause ? fmt.seconds(pause.seconds_left) : "no")),
    seriesSection(`endpoint=${encodeURIComponent(name)}`, ctx, { lede: "The seats served through it: error rate, then answer times (p50 and p95 of answered seats), per time bucket." }),
    h("section", { class: "section" }, sectionHead("Its models", "Each one's last day: seats, error rate and answer times."),
      modelsTable(models)));
}
