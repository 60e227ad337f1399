// Settings' webhooks: where alerts are POSTed (added, tested and removed here). The server never
// sends a webhook's whole URL back: the list shows it masked, as the CLI does.

import { api, seg } from "../api.js";
import { h, replace } from "../dom.js";
import {
  button, checkbox, confirmAction, field, input, notice, sectionHead, showError, timeAgo, toast,
  words,
} from "../ui.js";

function lastDelivery(last) {
  if (!last) return h("span", { class: "muted", text: "nothing sent yet" });
  if (last.ok) return h("span", null, `sent ${last.kind} `, timeAgo(last.ts));
  return h("span", { class: "text-bad", text: `failed (${last.kind}): ${last.error}` });
}

function testResults(results) {
  const bad = results.filter((r) => !r.ok);
  if (!bad.length) return notice("ok", `Test alert delivered to ${results.length === 1 ? "the webhook" : `all ${results.length} webhooks`}.`);
  return notice("error", "The test alert did not arrive everywhere.",
    bad.map((r) => `${r.id} (${r.url}): ${r.error}`).join("; "));
}

// `tested`: the slot a test's outcome is shown in, kept by the page so a reload leaves it
export function webhooksSection(hooks, reload, tested) {
  const url = input({ type: "url", placeholder: "https://hooks.example.com/…", autocomplete: "off" });
  const kinds = input({ placeholder: "every kind" });
  const { box: slack, el: slackBox } = checkbox("Send a Slack-compatible body ({\"text\": …})");
  const status = h("div", { "aria-live": "polite" });
  const add = button("Add webhook", null, { kind: "primary", type: "submit" });
  const form = h("form", { class: "card form", novalidate: true, "aria-label": "Add a webhook" },
    h("h3", { text: "New webhook" }),
    h("div", { class: "form-grid" },
      field("URL", url, { hint: "Alerts are POSTed here as JSON: kind, model, message, ts." }),
      field("Alert kinds", kinds, { hint: "Comma-separated, e.g. failing, went_paid; blank sends every kind." })),
    slackBox, status,
    h("div", { class: "form-actions" }, add));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (!url.value.trim()) { replace(status, notice("error", "Give the webhook's URL first.")); url.focus(); return; }
    add.disabled = true;
    replace(status);
    try {
      const made = await api.post("/api/alerts/webhooks", { url: url.value.trim(), kinds: words(kinds.value), slack: slack.checked });
      toast(`Webhook ${made.id} added.`);
      url.value = ""; kinds.value = ""; slack.checked = false;
      reload();
    } catch (err) {
      showError(status, err);
    } finally {
      add.disabled = false;
    }
  });

  const test = async (id, btn) => {
    btn.disabled = true;
    try {
      const got = await api.post("/api/alerts/webhooks/test", id ? { id } : {});
      replace(tested, testResults(got.data || []));
      reload();
    } catch (err) {
      showError(tested, err);
    } finally {
      btn.disabled = false;
    }
  };
  const rows = hooks.length ? hooks.map((w) => {
    const testOne = button("Test", () => test(w.id, testOne), { small: true, "aria-label": `Test webhook ${w.id}` });
    return h("tr", { dataset: { hook: w.id } },
      h("td", null, h("strong", { text: w.id })),
      h("td", { class: "mono", text: w.url }),
      h("td", { text: w.kinds.length ? w.kinds.join(", ") : "every kind" }),
      h("td", { text: w.slack ? "Slack" : "JSON" }),
      h("td", null, lastDelivery(w.last)),
      h("td", { class: "actions" }, testOne, button("Remove", async () => {
        if (!await confirmAction(`Remove webhook ${w.id}?`, "Alerts are no longer sent to it.", "Remove")) return;
        try {
          await api.del(`/api/alerts/webhooks/${seg(w.id)}`);
          toast(`Removed webhook ${w.id}.`);
          reload();
        } catch (err) {
          toast(err.message, { kind: "error" });
        }
      }, { small: true, kind: "danger", "aria-label": `Remove webhook ${w.id}` })));
  }) : h("tr", { class: "table-empty" }, h("td", { colspan: 6 }, "No webhook yet: alerts show in the banner and `panelist alerts` only."));

  return h("section", { class: "section" },
    sectionHead("Webhooks", "Each alert (a model failing or back, retired, gone paid…) is POSTed to these URLs as it is raised, retried with backoff if the receiver fails."),
    tested,
    h("div", { class: "table-wrap" }, h("table", null,
      h("thead", null, h("tr", null, ["Id", "URL", "Kinds", "Body", "Latest delivery", ""]
        .map((t) => h("th", { scope: "col" }, t)))),
      h("tbody", null, rows))),
    h("div", { class: "section" }, form));
}
