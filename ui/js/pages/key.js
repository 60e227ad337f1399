// A gateway key's page (#/keys/NAME): the seats, error rate and answer times of the panels
// called with it, over time (series.js), and links to its panels. Settings links each key here.

import { api } from "../api.js";
import { h, replace } from "../dom.js";
import * as fmt from "../format.js";
import { seriesSection } from "../series.js";
import { spendCell } from "../spend.js";
import { emptyState, linkButton, pageHead, sectionHead, timeAgo } from "../ui.js";

export const title = "Gateway key";

export async function render(root, ctx) {
  const name = ctx.path[0] || "";
  const [keys, budgets] = await Promise.all([api.get("/api/keys", { signal: ctx.signal }),
    api.get("/api/budgets", { signal: ctx.signal })]);
  const spend = (budgets.keys || []).find((b) => b.name === name) || {};
  const key = (keys.data || []).find((k) => k.name === name);
  if (!key) {
    replace(root, emptyState(`No gateway key ${name}`, "It was never made here, or the name is mistyped.",
      linkButton("Gateway keys", "#/settings", "primary")));
    return;
  }
  document.title = `${name} · Panelist`;
  replace(root,
    pageHead(`Gateway key ${name}`, `Collections: ${key.collections && key.collections.length ? key.collections.join(", ") : "all"} · `
      + `${key.rpm ? `${fmt.count(key.rpm)} calls a minute` : "no call limit"}`,
    linkButton("Its panels", `#/panels?key=${encodeURIComponent(name)}`, "primary"),
    linkButton("Its failed seats", `#/panels?key=${encodeURIComponent(name)}&status=failed`),
    linkButton("All keys", "#/settings")),
    h("p", { class: "meta" }, h("span", null, "Made ", timeAgo(key.created)), h("span", null, "Last used ", timeAgo(key.last_used))),
    h("section", { class: "section", "aria-label": "Spend cap" },
      sectionHead("Spend cap", "What its panels spent today and this month against its caps (panelist key budget sets them)."),
      h("p", { "data-testid": "key-spend" }, spendCell(spend.budget, spend.near_cap))),
    seriesSection(`key=${encodeURIComponent(name)}`, ctx, { lede: "The seats of the panels called with this key: error rate, then answer times (p50 and p95 of answered seats), per time bucket." }));
}
