// Spend against the caps of gateway keys and collections (GET /api/budgets), as Settings, a
// key's page and the Overview show it. A subject without a cap has no spend counted, so it
// says "no cap", never a spend of 0.

import { h } from "./dom.js";
import * as fmt from "./format.js";
import { sectionHead } from "./ui.js";

/** A key's or collection's spend against its caps (one row of GET /api/budgets): what was
 *  spent today and this month of each cap, and when each period starts again. */
export function spendCell(report, near) {
  if (!report) return h("span", { class: "muted" }, "no cap");
  const line = (p, label) => (report[p]
    ? h("span", { class: "sub", "data-period": p, title: `Starts again ${report[p].resets}` },
      `${label} ${fmt.money(report[p].spent, report.currency)} of ${fmt.money(report[p].cap, report.currency)}`,
      h("span", { class: "muted" }, ` · resets ${report[p].resets.replace("T", " ").replace(/:00Z$/, " UTC")}`))
    : null);
  return [near ? h("span", { class: "badge warn", title: "At 90% of a cap or past it: explorers are no longer seated, and a panel that would pass the cap is refused" }, "at its cap") : null,
    line("day", "Today"), line("month", "This month")];
}


/** The Overview's section: every capped key and collection with its spend, nearest its cap
 *  first; null when nothing is capped (a roster without caps has nothing to show). */
export function spendSection(budgets) {
  const rows = [];
  for (const [kind, list] of [["key", budgets.keys || []], ["collection", budgets.collections || []]]) {
    for (const r of list) if (r.budget) rows.push({ kind, ...r });
  }
  if (!rows.length) return null;
  const share = (r) => Math.max(...["day", "month"].filter((p) => r.budget[p])
    .map((p) => r.budget[p].spent / Math.max(r.budget[p].cap, 1e-12)));
  rows.sort((a, b) => share(b) - share(a) || a.name.localeCompare(b.name));
  const href = (r) => (r.kind === "key" ? `#/keys/${encodeURIComponent(r.name)}` : "#/collections");
  return h("section", { class: "section", "aria-label": "Spend against caps" },
    sectionHead("Spend against caps", "Each capped gateway key and collection: spent today and this month of its caps, nearest its cap first."),
    h("div", { class: "table-wrap short" }, h("table", { "data-testid": "spend-caps" },
      h("thead", null, h("tr", null, ["Subject", "Spend"].map((t) => h("th", { scope: "col", text: t })))),
      h("tbody", null, rows.map((r) => h("tr", { dataset: { kind: r.kind, name: r.name } },
        h("th", { scope: "row" }, `${r.kind === "key" ? "Key" : "Collection"} `, h("a", { href: href(r) }, r.name)),
        h("td", null, spendCell(r.budget, r.near_cap))))))));
}
