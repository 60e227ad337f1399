// Settings: gateway keys (made here, shown once, revoked here), the webhooks alerts are sent to
// (pages/webhooks.js), the theme, and facts about this server.

import { api, seg } from "../api.js";
import { h, newId, replace } from "../dom.js";
import * as fmt from "../format.js";
import { getTheme, setTheme, THEMES } from "../theme.js";
import { webhooksSection } from "./webhooks.js";
import { spendCell } from "../spend.js";
import {
  button, confirmAction, copyButton, field, input, notice, numberOrNull, pageHead, sectionHead,
  showError, timeAgo, toast, words,
} from "../ui.js";

export const title = "Settings";

function keysSection(keys, collections, reload, created, budgets = {}) {
  const name = input({ maxlength: 48, placeholder: "ci-bot" });
  const cols = input({ placeholder: "all collections", list: "key-collections" });
  const rpm = input({ type: "number", min: 1, step: 1, placeholder: "no limit", inputmode: "numeric" });
  const status = h("div", { "aria-live": "polite" });
  const make = button("Create key", null, { kind: "primary", type: "submit" });
  const form = h("form", { class: "card form", novalidate: true, "aria-label": "Create a gateway key" },
    h("h3", { text: "New key" }),
    h("div", { class: "form-grid" },
      field("Name", name, { hint: "Who or what uses it; written on every call it makes." }),
      field("Collections", cols, { hint: "Comma-separated; blank lets it ask every collection." }),
      field("Requests a minute", rpm, { hint: "Blank: no limit." })),
    h("datalist", { id: "key-collections" }, collections.map((c) => h("option", { value: c }))),
    status,
    h("div", { class: "form-actions" }, make));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (!name.value.trim()) { replace(status, notice("error", "Name the key first.")); name.focus(); return; }
    const body = { name: name.value.trim() };
    const picked = words(cols.value).map((c) => c.replace(/^bench\//, ""));
    if (picked.length) body.collections = picked;
    if (rpm.value.trim()) body.rpm = numberOrNull(rpm.value);
    make.disabled = true;
    replace(status);
    try {
      const k = await api.post("/api/keys", body);
      const secret = k.key;
      const secretEl = h("code", { "data-testid": "new-key", text: secret });
      replace(created, h("div", { class: "notice ok", role: "status" },
        h("div", { class: "grow stack" },
          h("p", { class: "notice-title" }, `Key "${k.name}" created. Copy it now: it is shown only once.`),
          h("div", { class: "secret" }, secretEl, copyButton(() => secret, "Copy", "Copy the key")),
          h("p", { class: "small" }, "Send it as Authorization: Bearer <key>. Panelist keeps only its digest."))));
      name.value = ""; cols.value = ""; rpm.value = "";
      reload();
    } catch (err) {
      showError(status, err);
    } finally {
      make.disabled = false;
    }
  });

  const tbody = h("tbody", null, keys.length ? keys.map((k) => h("tr", { dataset: { key: k.name } },
    h("td", null, h("a", { href: `#/keys/${encodeURIComponent(k.name)}`, title: `Key ${k.name} over time` }, h("strong", { text: k.name }))),
    h("td", { class: "mono", text: k.hint ? `…${k.hint}` : "" }),
    h("td", { text: k.collections && k.collections.length ? k.collections.join(", ") : "all" }),
    h("td", { class: "numeric", text: k.rpm ? fmt.count(k.rpm) : "no limit" }),
    h("td", null, timeAgo(k.created)),
    h("td", null, timeAgo(k.last_used)),
    h("td", { "data-testid": "key-spend" }, spendCell((budgets[k.name] || {}).budget, (budgets[k.name] || {}).near_cap)),
    h("td", { class: "actions" }, button("Revoke", async () => {
      if (!await confirmAction(`Revoke ${k.name}?`, "Calls with this key are refused from now on. Its name cannot be used again.", "Revoke")) return;
      try {
        await api.del(`/api/keys/${seg(k.name)}`);
        toast(`Revoked ${k.name}.`);
        reload();
      } catch (err) {
        toast(err.message, { kind: "error" });
      }
    }, { small: true, kind: "danger", "aria-label": `Revoke ${k.name}` }))))
    : h("tr", { class: "table-empty" }, h("td", { colspan: 8 }, "No key yet. Without PANELIST_ADMIN_TOKEN or PANELIST_REQUIRE_KEYS, callers on this machine need none.")));

  return h("section", { class: "section" },
    sectionHead("Gateway keys", "Apps calling /v1 send a key as Authorization: Bearer <key>. Each key's name is written on every call it makes."),
    created,
    h("div", { class: "table-wrap" }, h("table", null,
      h("thead", null, h("tr", null, ["Name", "Ends in", "Collections", "Requests a minute", "Created", "Last used", "Spend cap", ""]
        .map((t, i) => h("th", { scope: "col", class: i === 3 ? "numeric" : null }, t)))),
      tbody)),
    h("div", { class: "section" }, form));
}

function themeSection() {
  const current = getTheme();
  const name = newId("theme");
  const choices = THEMES.map(([value, label]) => {
    const radio = h("input", { type: "radio", name, value, checked: value === current });
    radio.addEventListener("change", () => { if (radio.checked) setTheme(value); });
    return h("label", { class: "theme-choice" }, radio, h("span", { text: label }));
  });
  return h("section", { class: "section" },
    sectionHead("Theme", "Kept in this browser."),
    h("fieldset", { class: "card" }, h("legend", { class: "visually-hidden", text: "Theme" }),
      h("div", { class: "theme-choices" }, choices)));
}

function infoSection(info) {
  const c = info.counts || {};
  const facts = [
    ["Version", info.version],
    ["Python", info.python],
    ["Data folder", h("span", { class: "mono", text: info.data_dir })],
    ["Gateway base URL", h("span", { class: "row" }, h("span", { class: "mono", text: info.gateway ? info.gateway.base_url : "" }),
      info.gateway ? copyButton(() => info.gateway.base_url, "Copy", "Copy the base URL") : null)],
    ["Admin token", info.auth && info.auth.token_required ? "required (PANELIST_ADMIN_TOKEN is set)" : "not set: open to callers on this machine"],
    ["Endpoints", fmt.count(c.endpoints)],
    ["Models", fmt.count(c.models)],
    ["Collections", fmt.count(c.collections)],
    ["Panels", fmt.count(c.panels)],
    ["Verdicts", fmt.count(c.verdicts)],
    ["Verdicts owed", fmt.count(c.owed)],
  ];
  return h("section", { class: "section" },
    sectionHead("Info", null),
    h("div", { class: "card" }, h("dl", { class: "facts" },
      facts.map(([k, v]) => [h("dt", { text: k }), h("dd", null, v ?? fmt.DASH)]))));
}

export async function render(root, ctx) {
  const spendOf = async () => {
    const b = await api.get("/api/budgets", { signal: ctx.signal });
    return Object.fromEntries((b.keys || []).map((row) => [row.name, row]));
  };
  const [keys, cols, info, hooks, budgets] = await Promise.all([
    api.get("/api/keys", { signal: ctx.signal }),
    api.get("/api/collections", { signal: ctx.signal }),
    ctx.info(),
    api.get("/api/alerts/webhooks", { signal: ctx.signal }),
    spendOf(),
  ]);
  const keysSlot = h("div");
  const created = h("div", { "aria-live": "polite" }); // the one-time secret outlives list refreshes
  const names = (cols.data || []).map((c) => c.name);
  const reloadKeys = async () => {
    try {
      const [fresh, spend] = await Promise.all([api.get("/api/keys", { signal: ctx.signal }), spendOf()]);
      replace(keysSlot, keysSection(fresh.data || [], names, reloadKeys, created, spend));
    } catch (err) {
      if (err.name !== "AbortError") toast(err.message, { kind: "error" });
    }
  };
  replace(keysSlot, keysSection(keys.data || [], names, reloadKeys, created, budgets));
  const hooksSlot = h("div");
  const tested = h("div", { "aria-live": "polite" }); // a webhook test's outcome outlives reloads
  const reloadHooks = async () => {
    try {
      const fresh = await api.get("/api/alerts/webhooks", { signal: ctx.signal });
      replace(hooksSlot, webhooksSection(fresh.data || [], reloadHooks, tested));
    } catch (err) {
      if (err.name !== "AbortError") toast(err.message, { kind: "error" });
    }
  };
  replace(hooksSlot, webhooksSection(hooks.data || [], reloadHooks, tested));
  replace(root,
    pageHead("Settings", "Keys for apps that call the gateway, where alerts are sent, how this dashboard looks, and facts about this server."),
    keysSlot, hooksSlot, themeSection(), infoSection(info));
}
