// Panels: every panel the gateway ran, newest first, each seat a chip. New panels arrive by a
// cursor poll (GET /api/panels?after=<latest> every 2 s, never a full refetch); older ones
// page in by panel id (before=). Filters (text in prompts and answers, model, collection, key,
// status, time; panelfilters.js) live in the address and go with every request, the poll
// included. A search box finds a panel or a call id. A panel whose reply
// never reached its caller (the caller left, or it was never delivered) owes no verdict: its
// answered seats say "not owed", and such panels are listed apart (the API's `apart`). Each chip
// follows its call's verdict state (verdictstate.js), so a verdict given in any view shows here.

import { api, query, seg } from "../api.js";
import { h, replace } from "../dom.js";
import * as fmt from "../format.js";
import { describe, FILTERS, filterBar, filterQuery, filtering, filtersFrom, hashFor, indexNote,
  matchLine } from "../panelfilters.js";
import { watch } from "../verdictstate.js";
import { button, emptyState, failureBadge, input, linkButton, notice, openSeatLater, pageHead, panelFailures, seatChip, seatLabel, timeAgo, answered } from "../ui.js";

export const title = "Panels";
const POLL_MS = 2000;
const PAGE = 50;

function verdictValue(v) {
  if (v === null || v === undefined) return null;
  return typeof v === "object" ? Boolean(v.useful) : Boolean(v);
}

function owedIn(panel) {
  return (panel.seats || []).filter((s) => answered(s) && verdictValue(s.verdict) === null).length;
}

const APART_WORDS = { abandoned: "caller left", undelivered: "reply never delivered" };

// a seat chip of a panel its caller never received: judging it is still possible, but not owed
function notOwed(chip) {
  const mark = chip.querySelector(".verdict-mark.owed");
  if (!mark) return chip;
  mark.replaceWith(h("span", { class: "verdict-mark not-owed", title: "The caller never received this panel's reply: no verdict is owed" }, "not owed"));
  chip.setAttribute("aria-label", chip.getAttribute("aria-label").replace(/verdict owed$/, "no verdict owed"));
  return chip;
}

// names the filters suggest; a page that cannot read them still filters by what is typed
async function filterChoices(signal) {
  const names = (path, pick) => api.get(path, { signal }).then((r) => (r.data || []).map(pick), () => []);
  const [models, collections, keys] = await Promise.all([
    names("/api/models", (m) => m.alias), names("/api/collections", (c) => c.id),
    names("/api/keys", (k) => k.name)]);
  return { models, collections, keys: ["local", "dashboard", ...keys] };
}

// the filter form and what the filters match, above the list
function filterHead(ctx, filters, choices, error = null) {
  const apply = (chosen) => ctx.navigate(hashFor(chosen));
  return h("div", { class: "stack" },
    filterBar(filters, { choices, error, onApply: apply }),
    filtering(filters) && !error ? h("p", { class: "muted", "data-testid": "filter-summary" },
      `Panels matching ${describe(filters)}, newest first.`) : null);
}

export async function render(root, ctx) {
  const filters = filtersFrom(ctx.params);
  const filtered = filtering(filters);
  const choices = filterChoices(ctx.signal);
  let first;
  try {
    first = await api.get(`/api/panels${query({ limit: PAGE, ...filterQuery(filters) })}`, { signal: ctx.signal });
  } catch (err) {
    if (err.status !== 400 || !FILTERS.includes(err.param)) throw err;
    replace(root, pageHead("Panels", "Every request the gateway ran, newest first."),
      filterHead(ctx, filters, await choices, err));
    return;
  }
  let latest = first.latest || null;
  let next = first.next || null;

  const owedLine = h("span", { class: "badge warn" });
  const live = h("span", { class: "live", role: "status" },
    h("span", { class: "dot", "aria-hidden": "true" }), "Live: new panels appear here by themselves");
  const list = h("div", { class: "panel-list", "aria-label": "Panels, newest first", role: "list" });
  const found = h("div", { "aria-live": "polite" });
  const more = button("Show older panels", () => loadOlder(), {});
  const moreNote = h("span", { class: "muted small" });
  const emptySlot = h("div");
  const byId = new Map();
  // panels whose reply never reached the caller, by id -> reason (from the first page's `apart`)
  const apart = new Map((first.apart || []).map((p) => [p.panel, p.reason]));
  const apartList = h("div", { "aria-live": "polite" });
  const judged = new Map();      // call -> verdict saved on this page (newer than the listing)
  const shownAs = new WeakMap(); // panel element -> the record it shows

  function setOwed(owed) {
    owedLine.hidden = !owed;
    owedLine.textContent = `${fmt.count(owed)} ${owed === 1 ? "verdict" : "verdicts"} owed`;
    ctx.setOwed(owed);
  }

  function openChip(seat) {
    openSeatLater(seat.call, { title: `${seatLabel(seat)} · ${seat.alias}` });
  }

  // a verdict that changed, from any view (this page's dialog, the owed queue, Ask): the panel
  // is drawn again with it, and the owed count asked for again
  function verdictChanged(panelId, call, value) {
    judged.set(call, value);
    for (const el of root.querySelectorAll(`[data-panel="${CSS.escape(panelId)}"]`)) {
      const record = shownAs.get(el);
      if (record) el.replaceWith(withMatch(panelItem(record, el.classList.contains("found")), record));
    }
    ctx.refreshInfo().then((info) => { if (info && ctx.active) setOwed(info.counts.owed); }, () => {});
  }

  function seatView(s, seatName = s.seat) {
    return { ...s, seat: seatName, verdict: judged.has(s.call) ? judged.get(s.call) : verdictValue(s.verdict) };
  }

  function panelItem(p, isFound = false) {
    const seats = (p.seats || []).map((s) => seatView(s));
    const merger = p.merger ? seatView(p.merger, "merger") : null;
    const gone = p.abandoned ? "abandoned" : apart.get(p.panel) || null;
    const owed = gone ? 0 : owedIn({ seats });
    const chip = (s) => {
      const el = seatChip(s, openChip);
      // the listing is as new as the store's state at this point: only later changes redraw
      let ready = false;
      watch(s.call, el, (v) => {
        const value = v ? Boolean(v.useful) : null;
        if (ready && value !== s.verdict) verdictChanged(p.panel, s.call, value);
      });
      ready = true;
      return gone ? notOwed(el) : el;
    };
    const el = h("article", { class: ["panel-item", isFound && "found", panelFailures([...seats, merger]).none && "all-failed"], role: "listitem", dataset: { panel: p.panel } },
      h("div", null,
        h("div", { class: "panel-id", text: p.panel }),
        h("div", { class: "panel-meta" },
          h("span", null, h("strong", { text: p.collection })),
          h("span", null, timeAgo(p.started))),
        h("div", { class: "panel-meta" },
          h("span", null, `asked by ${p.key || "local"}`),
          h("span", null, fmt.seconds(p.seconds)),
          p.shape ? h("span", null, `shape ${p.shape}`) : null,
          p.reply === "merged" ? h("span", null, "merged reply") : null,
          p.reply === "pick" ? h("span", null, "picked reply") : null),
        h("div", { class: "row" },
          failureBadge([...seats, merger]),
          gone ? h("span", { class: "badge bad" }, `${APART_WORDS[gone] || gone}: no verdict owed`) : null,
          owed ? h("span", { class: "badge warn" }, `${owed} owed`) : null)),
      h("div", { class: "seats" },
        seats.map(chip),
        merger ? chip(merger) : null));
    shownAs.set(el, p);
    return el;
  }

  // a text search's hit: where in the panel the text was found
  function withMatch(item, p) {
    const line = matchLine(p.match);
    if (line) item.append(line);
    return item;
  }

  function add(panels, { atTop = false, fresh = false } = {}) {
    const frag = document.createDocumentFragment();
    for (const p of panels) {
      if (!p || typeof p.panel !== "string" || byId.has(p.panel)) continue; // seen, or no panel
      byId.set(p.panel, p);
      const item = withMatch(panelItem(p), p);
      if (fresh) item.classList.add("is-new");
      if (atTop) list.prepend(item);
      else frag.append(item);
    }
    if (!atTop) list.append(frag);
    if (filtered) {
      replace(emptySlot, byId.size ? null : emptyState("No panel matches these filters",
        "Loosen a filter, or clear them to see every panel; a new panel that matches appears here by itself.",
        linkButton("Clear filters", "#/panels")));
      return;
    }
    replace(emptySlot, byId.size ? null : emptyState("No panels yet",
      "A panel appears here the moment a collection is asked: on the Ask page, or from any OpenAI "
      + "client pointed at this server's /v1.", linkButton("Ask a collection", "#/ask", "primary")));
  }

  function showApart() {
    const rows = first.apart || [];
    replace(apartList, rows.length ? h("details", { class: "fold apart", "aria-label": "Panels not owed a verdict" },
      h("summary", null, `${fmt.count(rows.length)} recent ${rows.length === 1 ? "panel" : "panels"} never reached the caller: no verdict owed`),
      h("div", { class: "fold-body" },
        h("p", { class: "muted small" }, "Their answers were logged as evidence, but the caller never received the reply, so they are not counted as owed. You may still judge them."),
        h("ul", { class: "plain" }, rows.map((r) => h("li", { dataset: { panel: r.panel } },
          h("span", { class: "mono", text: r.panel }), ` · ${APART_WORDS[r.reason] || r.reason} · `,
          `${fmt.count((r.calls || []).length)} answered ${(r.calls || []).length === 1 ? "seat" : "seats"} without a verdict`))))) : null);
  }

  function showPaging() {
    more.hidden = !next;
    moreNote.textContent = next || !byId.size ? "" : filtered ? "That is every panel that matches." : "That is every panel.";
  }

  async function loadOlder() {
    more.disabled = true;
    try {
      const page = await api.get(`/api/panels${query({ before: next, limit: PAGE, ...filterQuery(filters) })}`, { signal: ctx.signal });
      add(page.data || []);
      next = page.next || null;
      showPaging();
    } catch (err) {
      if (err.name !== "AbortError") replace(moreNote, `Could not load older panels: ${err.message}`);
    } finally {
      more.disabled = false;
    }
  }

  // the cursor poll: only what is newer than the newest panel shown
  let timer = null;
  async function poll() {
    timer = null;
    if (!ctx.active) return;
    if (!document.hidden) {
      try {
        const url = latest ? `/api/panels${query({ after: latest, ...filterQuery(filters) })}`
          : `/api/panels${query({ limit: PAGE, ...filterQuery(filters) })}`;
        const page = await api.get(url, { signal: ctx.signal });
        const rows = page.data || [];
        if (latest) add(rows, { atTop: true, fresh: true }); // after= is oldest first
        else if (rows.length) { add(rows.slice().reverse(), { atTop: true, fresh: true }); next = page.next || null; showPaging(); }
        // an after-poll may name its own cursor (held below a panel still in flight, so that
        // one is not passed over); else go on from the newest panel
        const cursor = latest ? page.next : null;
        latest = cursor || page.latest || (rows.length ? rows[latest ? rows.length - 1 : 0].panel : latest);
        if (typeof page.owed === "number") setOwed(page.owed);
        // the index finished what the first page lacked: list again, now whole
        if (first.index && !first.index.complete && page.index && page.index.complete) {
          ctx.navigate(hashFor(filters));
          return;
        }
        live.classList.remove("paused");
        live.lastChild.textContent = "Live: new panels appear here by themselves";
      } catch (err) {
        if (err.name === "AbortError") return;
        live.classList.add("paused");
        live.lastChild.textContent = `Paused: ${err.message} Retrying…`;
      }
    }
    if (ctx.active) timer = setTimeout(poll, POLL_MS);
  }
  ctx.onCleanup(() => clearTimeout(timer));

  // search: a panel id or a call id
  const q = input({ type: "search", placeholder: "p20261130-42 or p20261130-42.member1" });
  const search = h("form", { class: "searchbar", role: "search" },
    h("label", { for: "panel-search", class: "visually-hidden", text: "Find a panel or call id" }), q,
    button("Find", null, { type: "submit" }));
  q.id = "panel-search";
  search.addEventListener("submit", async (event) => {
    event.preventDefault();
    const text = q.value.trim();
    if (!text) { replace(found); return; }
    replace(found, h("p", { class: "muted" }, "Looking…"));
    try {
      const hit = await api.get(`/api/find${query({ q: text })}`, { signal: ctx.signal });
      const record = await api.get(`/api/panels/${seg(hit.panel)}`, { signal: ctx.signal });
      replace(found, h("div", { class: "stack" },
        h("div", { class: "row spread" }, h("h2", { text: "Found" }),
          button("Clear", () => { replace(found); q.value = ""; q.focus(); }, { small: true })),
        panelItem(record, true)));
      const wanted = hit.call || (text !== hit.panel ? text : null);
      if (wanted) {
        const seatRec = [...(record.seats || []), record.merger].find((s) => s && s.call === wanted);
        if (seatRec) openChip(seatRec);
      }
    } catch (err) {
      if (err.name === "AbortError") return;
      replace(found, notice(err.status === 404 ? "" : "error",
        err.status === 404 ? `Nothing found for "${text}"` : "Search failed", err.message));
    }
  });

  replace(root,
    pageHead("Panels", "Every request the gateway ran, newest first. Each chip is one seat: click it to "
      + "read the answer and say whether it was useful.", owedLine),
    filterHead(ctx, filters, await choices),
    indexNote(first.index),
    h("div", { class: "row spread" }, search, live),
    found,
    apartList,
    h("div", { class: "section" }, list, emptySlot),
    h("div", { class: "row section" }, more, moreNote));
  setOwed(first.owed || 0);
  showApart();
  add(first.data || []);
  showPaging();
  timer = setTimeout(poll, POLL_MS);
}
