// Shared pieces of every page: headings, states (loading, empty, error), notices, toasts,
// labelled fields, dialogs, copy buttons and small status marks.

import { h, s, newId, replace } from "./dom.js";
import { isAbort, seg } from "./api.js";
import * as fmt from "./format.js";

// ------------------------------------------------------------------ page structure
// The seat dialog (and the Markdown renderer it brings) is fetched on its first Open, so a
// page that only links to it asks for its own data without waiting on that code.
export const openSeatLater = (...args) => import("./seat.js").then((m) => m.openSeat(...args));

export function pageHead(title, lede, ...actions) {
  return h("header", { class: "page-head" },
    h("div", null, h("h1", { text: title }), lede ? h("p", { class: "lede" }, lede) : null),
    actions.length ? h("div", { class: "page-actions" }, actions) : null);
}

export function sectionHead(title, lede, ...actions) {
  return h("div", { class: "section-head" },
    h("div", null, h("h2", { text: title }), lede ? h("p", null, lede) : null),
    actions.length ? h("div", { class: "page-actions" }, actions) : null);
}

export function button(label, onClick, { kind = "", small = false, type = "button", ...rest } = {}) {
  return h("button", {
    type, class: ["btn", kind, small && "small"], on: onClick ? { click: onClick } : null, ...rest,
  }, label);
}

export function linkButton(label, href, kind = "") {
  return h("a", { class: ["btn", kind], href }, label);
}

// ------------------------------------------------------------------ states
export function loading(text = "Loading…") {
  return h("div", { class: "loading", role: "status" }, h("span", { class: "spinner", "aria-hidden": "true" }), text);
}

export function emptyState(title, body, ...actions) {
  return h("div", { class: "state" },
    h("h3", { text: title }),
    body ? h("p", null, body) : null,
    actions.length ? h("div", { class: "row" }, actions) : null);
}

export function errorState(err, retry) {
  return h("div", { class: "state error", role: "alert" },
    h("h3", { text: "This page could not load" }),
    h("p", { text: err && err.message ? err.message : String(err) }),
    retry ? button("Try again", retry) : null);
}

/** A message box for forms: an error (with a Reload button on a stale edit) or a note. */
export function notice(kind, title, body, ...actions) {
  return h("div", { class: ["notice", kind], role: kind === "error" ? "alert" : "status" },
    h("div", { class: "grow" },
      title ? h("p", { class: "notice-title", text: title }) : null,
      body ? h("p", { text: body }) : null),
    actions.length ? h("div", { class: "row" }, actions) : null);
}

/** Show a failed write inside `slot`; a 409 stale gets the words people need and a Reload. */
export function showError(slot, err, reload) {
  if (isAbort(err)) return;
  const form = slot.closest("form");
  if (form) clearFieldErrors(form);
  if (form && !(err && err.stale) && showFieldError(form, err)) {
    replace(slot, notice("error", "Not saved", "Fix the marked field and save again."));
    return;
  }
  if (err && err.stale) {
    replace(slot, notice("error", "Changed by someone else — reload",
      `${err.message} Your edits here are not saved.`,
      reload ? button("Reload", reload, { kind: "primary", small: true }) : null));
  } else {
    replace(slot, notice("error", "Not saved", err && err.message ? err.message : String(err)));
  }
}

/**
 * Run a form's save (`send`, a create or an edit): its button is held while it runs; on
 * success the form's dialog (if any) closes, `said` is toasted and `done` refreshes the page; a
 * refusal (a stale edit included) shows in `status`, where Reload closes and refreshes.
 */
export async function saveForm({ save, status, send, close = () => {}, done, said }) {
  save.disabled = true;
  replace(status);
  try {
    await send();
    close();
    toast(said);
    done();
  } catch (err) {
    showError(status, err, () => { close(); done(); });
  } finally {
    save.disabled = false;
  }
}

/**
 * A refusal that names its field (the server's `param`, a control's `name`) shown beside that
 * field: the message names the field by its label, the control is marked invalid, described by
 * the message and focused. False when no field of `form` matches.
 */
export function showFieldError(form, err) {
  const param = err && err.param;
  const control = param ? form.querySelector(`[name="${CSS.escape(param)}"]`) : null;
  if (!control) return false;
  const box = control.closest(".field") || control.parentElement;
  const label = box.querySelector("label");
  const name = label ? label.textContent.trim() : param;
  const text = fmt.sentence(String(err.message || "").replace(`'${param}'`, name));
  const id = `${control.id || newId("field")}-error`;
  box.append(h("span", { class: "field-error", id, role: "alert", text }));
  control.setAttribute("aria-invalid", "true");
  const prior = control.getAttribute("aria-describedby");
  control.setAttribute("aria-describedby", prior ? `${prior} ${id}` : id);
  // the error goes as soon as the field is changed: red stays only on what is still wrong
  control.addEventListener("input", () => takeBack(control, box.querySelector(`#${CSS.escape(id)}`)), { once: true });
  control.focus();
  return true;
}

function takeBack(control, error) {
  if (!error) return;
  const rest = (control.getAttribute("aria-describedby") || "").split(" ").filter((x) => x && x !== error.id);
  if (rest.length) control.setAttribute("aria-describedby", rest.join(" "));
  else control.removeAttribute("aria-describedby");
  control.removeAttribute("aria-invalid");
  error.remove();
}

/** Take back what showFieldError marked in `form`. */
export function clearFieldErrors(form) {
  for (const el of form.querySelectorAll(".field > .field-error[role=alert]")) {
    const control = form.querySelector(`[aria-describedby~="${CSS.escape(el.id)}"]`);
    if (control) takeBack(control, el);
    else el.remove();
  }
}

// ------------------------------------------------------------------ toasts
let toastRoot = null;

export function toast(message, { kind = "", timeout = 5000 } = {}) {
  if (!toastRoot) {
    toastRoot = h("div", { class: "toasts", role: "status", "aria-live": "polite" });
    document.body.append(toastRoot);
  }
  const close = () => item.remove();
  const item = h("div", { class: ["toast", kind] },
    h("span", { class: "grow", text: message }),
    h("button", { type: "button", "aria-label": "Dismiss", on: { click: close } }, "×"));
  toastRoot.append(item);
  if (timeout) setTimeout(close, timeout);
  return item;
}

// ------------------------------------------------------------------ form fields
/** A labelled field: label → control (for/id), hint → aria-describedby. */
export function field(label, control, { hint = null, wide = false, id = null } = {}) {
  const controlId = id || control.id || newId("field");
  control.id = controlId;
  let hintEl = null;
  if (hint) {
    hintEl = h("span", { class: "hint", id: `${controlId}-hint` }, hint);
    const prior = control.getAttribute("aria-describedby");
    control.setAttribute("aria-describedby", prior ? `${prior} ${hintEl.id}` : hintEl.id);
  }
  return h("div", { class: ["field", wide && "wide"] },
    h("label", { for: controlId, text: label }), control, hintEl);
}

export function input(props = {}) {
  return h("input", { type: "text", autocomplete: "off", spellcheck: "false", ...props });
}

export function checkbox(label, props = {}) {
  const box = h("input", { type: "checkbox", ...props });
  return { box, el: h("label", { class: "check" }, box, h("span", { text: label })) };
}

/** Radio buttons as a fieldset with a legend; returns {el, value(), set(v)}. */
export function radios(legend, name, options, current) {
  const inputs = options.map(([value, label]) => h("input", {
    type: "radio", name, value, checked: value === current,
  }));
  const el = h("fieldset", null, h("legend", { text: legend }),
    h("div", { class: "choices" }, options.map(([, label], i) => h("label", { class: "check" },
      inputs[i], h("span", { text: label })))));
  return {
    el, inputs,
    value: () => (inputs.find((i) => i.checked) || {}).value ?? null,
    set: (v) => inputs.forEach((i) => { i.checked = i.value === v; }),
  };
}

export function select(options, current, props = {}) {
  return h("select", props, options.map(([value, label]) => h("option", {
    value, selected: value === current,
  }, label)));
}

/** Numbers typed into a field: "" → null, else a Number (NaN stays NaN for the server to refuse). */
export function numberOrNull(value) {
  const text = String(value ?? "").trim();
  return text === "" ? null : Number(text);
}

/** Lines typed into a textarea → a list without empty lines. */
export function lines(text) {
  return String(text || "").split("\n").map((l) => l.trim()).filter(Boolean);
}

/** "a, b,c" → ["a", "b", "c"] */
export function words(text) {
  return String(text || "").split(",").map((w) => w.trim()).filter(Boolean);
}

// ------------------------------------------------------------------ dialogs
// What finds an element again after a redraw: a page that redraws while a dialog is open (a
// saved verdict redraws its panel) or just after it closed (a saved edit reloads the page)
// replaces the opener with a twin. The twin has the opener's id, or sits in the element of the
// same call or panel id with the same label, or is the same n-th element of that label.
function finderOf(el) {
  if (!el || el === document.body || !(el instanceof Element)) return null;
  const tag = el.tagName.toLowerCase();
  const label = (e) => e.getAttribute("aria-label") || e.textContent.trim();
  const named = label(el);
  const same = (root) => [...root.querySelectorAll(tag)].filter((e) => label(e) === named);
  if (el.id) {
    const id = `#${CSS.escape(el.id)}`;
    return () => document.querySelector(id);
  }
  const holder = el.closest("[data-call], [data-panel]");
  if (holder) {
    const attr = holder.dataset.call !== undefined ? "data-call" : "data-panel";
    const where = `[${attr}="${CSS.escape(holder.getAttribute(attr))}"]`;
    // the opener is that element itself (a seat chip): its label may change with the verdict
    if (holder === el) return () => document.querySelector(`${tag}${where}`);
    return () => {
      for (const box of document.querySelectorAll(where)) {
        const twin = same(box)[0];
        if (twin) return twin;
      }
      return null;
    };
  }
  const nth = same(document).indexOf(el);
  return nth < 0 ? null : () => same(document)[nth] || null;
}

const REDRAW_WAIT_MS = 10000;   // how long a closed dialog's opener is followed through redraws

function returnFocus(opener, find) {
  const target = opener && opener.isConnected ? opener : find && find();
  if (!target || typeof target.focus !== "function") return;
  target.focus();
  if (!find) return;
  // the page may redraw just after: follow the opener to its twin, unless the focus moved on
  let held = target;
  const watch = new MutationObserver(() => {
    if (held.isConnected) return;
    const active = document.activeElement;
    if (active && active !== document.body && active.id !== "main") { watch.disconnect(); return; }
    const twin = find();
    if (twin && typeof twin.focus === "function") { twin.focus(); held = twin; }
  });
  watch.observe(document.body, { childList: true, subtree: true });
  const stop = () => watch.disconnect();
  setTimeout(stop, REDRAW_WAIT_MS);
  window.addEventListener("hashchange", stop, { once: true });   // another page: its own focus
}

/**
 * A modal <dialog>: Escape and the Close button close it, focus returns to what opened it (or,
 * when the page redrew that meanwhile, to its twin in the new drawing).
 * `build({close})` returns {body, foot}; the dialog is removed from the page when closed.
 */
export function openDialog({ title, sub = null, wide = false, label = null }, build) {
  const titleId = newId("dlg");
  const dialog = h("dialog", { class: wide ? "wide" : null, "aria-labelledby": titleId });
  const opener = document.activeElement;
  const findOpener = finderOf(opener);
  let closed = false;
  const handlers = [];
  const close = () => {
    if (closed) return;
    closed = true;
    if (dialog.open) dialog.close();
  };
  dialog.addEventListener("close", () => {
    closed = true;
    handlers.forEach((fn) => fn());
    dialog.remove();
    returnFocus(opener, findOpener);
  });
  const { body, foot } = build({ close, onClose: (fn) => handlers.push(fn), dialog });
  dialog.append(h("div", { class: "dialog-inner" },
    h("div", { class: "dialog-head" },
      h("div", null, h("h2", { id: titleId, text: title }), sub ? h("div", { class: "sub" }, sub) : null),
      h("button", { type: "button", class: "btn ghost small", "aria-label": label || "Close", on: { click: close } }, "Close")),
    h("div", { class: "dialog-body" }, body),
    foot ? h("div", { class: "dialog-foot" }, foot) : null));
  document.body.append(dialog);
  dialog.showModal();
  return { dialog, close };
}

/** Ask before something that cannot be undone; resolves true when confirmed. */
export function confirmAction(title, message, confirmLabel = "Delete") {
  return new Promise((resolve) => {
    let answer = false;
    openDialog({ title }, ({ close, onClose }) => {
      onClose(() => resolve(answer));
      const yes = button(confirmLabel, () => { answer = true; close(); }, { kind: "danger solid" });
      return {
        body: h("p", { text: message }),
        foot: [button("Cancel", close), yes],
      };
    });
  });
}

// ------------------------------------------------------------------ copying
export function copyButton(getText, label = "Copy", name = null) {
  const btn = button(label, async () => {
    const text = getText();
    try {
      await navigator.clipboard.writeText(text);
      btn.textContent = "Copied";
    } catch {
      btn.textContent = "Select and press Ctrl+C";
    }
    setTimeout(() => { btn.textContent = label; }, 2500);
  }, { small: true, "aria-label": name });
  return btn;
}

// ------------------------------------------------------------------ times and names
/**
 * A time as every page shows it: relative ("5 min ago", "in 4 min"), the exact UTC time on
 * hover. `value` is epoch seconds or an ISO time; without one, `never` (faint).
 */
export function timeAgo(value, { never = "never" } = {}) {
  const epoch = fmt.epochOf(value);
  if (epoch === null) return h("span", { class: "faint" }, never);
  return h("time", { datetime: new Date(epoch * 1000).toISOString(), title: fmt.when(epoch) },
    fmt.relative(epoch));
}

/** Where a model's page is. */
export function modelHref(alias) {
  return `#/models/${seg(alias)}`;
}

/** A model's name, as a link to its page (every model name the dashboard shows is one). */
export function modelLink(alias, { strong = true, ...props } = {}) {
  if (typeof alias !== "string" || !alias) return fmt.DASH;
  const link = h("a", { class: "model-link", href: modelHref(alias), ...props }, alias);
  return strong ? h("strong", null, link) : link;
}

// ------------------------------------------------------------------ marks
const STATUS_WORDS = {
  answering: "answering", cooling: "cooling down", retired: "retired", untested: "untested",
  failing: "failing",
};

/** Why a failing model is failing, in a few words (the server's `why` is the long form). */
function failingDetail(model) {
  const f = model.failing;
  if (!f) return null;
  const words = f.probe ? `probe failed (${f.kind})` : `${f.failed} of last ${f.of} failed`;
  return h("span", { class: "detail", title: f.why || words }, words);
}

export function modelStatus(model) {
  const st = model.status || "untested";
  let detail = null;
  if (st === "cooling" && model.cooling_until) {
    detail = h("span", { class: "detail" }, "until ", timeAgo(model.cooling_until));
  } else if (st === "failing") {
    detail = failingDetail(model);
  }
  return h("span", { class: ["status", st] }, h("span", { class: "dot", "aria-hidden": "true" }),
    STATUS_WORDS[st] || st, detail);
}

export function verdictMark(verdict) {
  if (verdict === true) return h("span", { class: "verdict-mark useful" }, "✓ useful");
  if (verdict === false) return h("span", { class: "verdict-mark not-useful" }, "✗ not useful");
  return h("span", { class: "verdict-mark owed", title: "No verdict yet" }, "owed");
}

/** A rate with its 95% interval, drawn as a small bar (0–100%) beside the words. */
export function rateCell(rate, iv, useful, notUseful) {
  const judged = (useful || 0) + (notUseful || 0);
  if (!judged) return h("span", { class: "faint" }, "no verdicts");
  const W = 64;
  const H = 10;
  const lo = Array.isArray(iv) ? iv[0] : rate;
  const hi = Array.isArray(iv) ? iv[1] : rate;
  const svg = s("svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, "aria-hidden": "true" },
    s("rect", { class: "track", x: 0, y: 3, width: W, height: 4, rx: 2 }),
    s("rect", { class: "span", x: (lo * W).toFixed(1), y: 1, width: Math.max(1, (hi - lo) * W).toFixed(1), height: 8, rx: 2 }),
    s("circle", { class: "point", cx: (rate * W).toFixed(1), cy: 5, r: 3 }));
  return h("span", { class: "interval", title: `95% interval ${fmt.interval(iv)}` },
    h("span", null, h("strong", { text: fmt.percent(rate) }), " ",
      h("span", { class: "muted" }, `of ${fmt.count(judged)}`),
      h("span", { class: "sub" }, fmt.interval(iv))),
    svg);
}

/** A seat's label as its call id ends ("member2", "explorer1", "merger"); else its kind. */
// the statuses of a seat that gave an answer to judge (text, tool calls or both)
export function answered(seat) {
  return seat.status === "ok" || seat.status === "tool_calls";
}

/** A seat that ended without an answer, other than one cut short because it was no longer
 * needed (`cancelled`: the caller left, or a pick went out first). */
export function seatFailed(seat) {
  return !answered(seat) && seat.status !== "cancelled";
}

/** How a panel's seats (and merger) fared: `{failed, of, none}`; `none` is true when seats
 * failed and not one answered. */
export function panelFailures(seats) {
  const all = seats.filter(Boolean);
  const failed = all.filter(seatFailed).length;
  return { failed, of: all.length, none: failed > 0 && !all.some(answered) };
}

/** The badge of a panel in which seats failed, or null: "2 of 5 seats failed", or, when every
 * seat failed, "no seat answered". */
export function failureBadge(seats) {
  const f = panelFailures(seats);
  if (!f.failed) return null;
  return f.none
    ? h("span", { class: "badge bad", dataset: { failed: "all" }, title: `All ${f.of} seats failed: the caller got an error` }, "no seat answered")
    : h("span", { class: "badge warn", dataset: { failed: String(f.failed) } }, `${f.failed} of ${f.of} seats failed`);
}

export function seatLabel(seat) {
  const call = typeof seat.call === "string" ? seat.call : "";
  const dot = call.lastIndexOf(".");
  return dot >= 0 && dot < call.length - 1 ? call.slice(dot + 1) : seat.seat;
}

/** A seat as a button: seat name, model, status (colour and word), seconds, verdict mark. */
export function seatChip(seat, onOpen) {
  const label = `${seatLabel(seat)} ${seat.alias}, ${seat.status}, ${fmt.seconds(seat.seconds)}, `
    + (seat.verdict === true ? "useful" : seat.verdict === false ? "not useful" : "verdict owed");
  const chip = h("button", {
    type: "button", class: ["seat-chip", `status-${seat.status}`], "aria-label": label,
    title: `${seat.call} — open the answer and record a verdict`,
    dataset: { call: seat.call }, on: { click: () => onOpen(seat, chip) },
  },
  h("span", { class: "dot", "aria-hidden": "true" }),
  h("span", { class: "seat-name", text: seatLabel(seat) }),
  h("span", { class: "alias", text: seat.alias }),
  !answered(seat) ? h("span", { class: "muted", text: seat.status }) : null,
  h("span", { class: "secs", text: fmt.seconds(seat.seconds) }),
  answered(seat) || seat.verdict !== null && seat.verdict !== undefined
    ? verdictMark(seat.verdict) : null);
  return chip;
}
