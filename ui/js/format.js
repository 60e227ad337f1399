// Numbers and times as people read them. Inputs may be null: every formatter says "—" then.

export const DASH = "—";

const timeOnly = new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit" });
const dayOnly = new Intl.DateTimeFormat(undefined, { month: "short", day: "numeric" });
const integer = new Intl.NumberFormat(undefined, { maximumFractionDigits: 0 });

function isNum(v) {
  return typeof v === "number" && Number.isFinite(v);
}

/** Epoch seconds → "2026-11-30 14:05:09 UTC": the exact time every page shows on hover. */
export function when(epoch) {
  return isNum(epoch) ? new Date(epoch * 1000).toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC") : DASH;
}

/** Epoch seconds, or an ISO time as the logs write it, → epoch seconds; null for neither. */
export function epochOf(value) {
  if (isNum(value)) return value;
  if (typeof value === "string" && value) {
    const t = Date.parse(value);
    return Number.isNaN(t) ? null : t / 1000;
  }
  return null;
}

/** The one way a time reads: "5 min ago" in the past, "in 4 min" ahead. */
export function relative(epoch, now = Date.now() / 1000) {
  if (!isNum(epoch)) return DASH;
  return epoch > now + 1 ? until(epoch, now) : ago(epoch, now);
}

export function clock(epoch) {
  return isNum(epoch) ? timeOnly.format(new Date(epoch * 1000)) : DASH;
}

export function day(epoch) {
  return isNum(epoch) ? dayOnly.format(new Date(epoch * 1000)) : DASH;
}

/** Epoch seconds → "just now", "5 min ago", "3 h ago", "2 days ago", or a date. */
export function ago(epoch, now = Date.now() / 1000) {
  if (!isNum(epoch)) return DASH;
  const d = Math.max(0, now - epoch);
  if (d < 45) return "just now";
  if (d < 3600) return `${Math.round(d / 60)} min ago`;
  if (d < 86400) return `${Math.round(d / 3600)} h ago`;
  if (d < 86400 * 14) return `${Math.round(d / 86400)} days ago`;
  return day(epoch);
}

/** Epoch seconds in the future → "in 40 s", "in 4 min", "in 3 h", "in 2 days". */
export function until(epoch, now = Date.now() / 1000) {
  if (!isNum(epoch)) return DASH;
  const d = epoch - now;
  if (d <= 0) return "now";
  if (d < 60) return `in ${Math.ceil(d)} s`;
  if (d < 3600) return `in ${Math.ceil(d / 60)} min`;
  if (d < 86400) return `in ${Math.round(d / 3600)} h`;
  return `in ${Math.round(d / 86400)} days`;
}

export function seconds(v) {
  if (!isNum(v)) return DASH;
  if (v < 10) return `${v.toFixed(2)} s`;
  if (v < 100) return `${v.toFixed(1)} s`;
  return `${integer.format(v)} s`;
}

/** An answer time: under a second in milliseconds ("340 ms"), else as ``seconds``. */
export function answerTime(v) {
  if (!isNum(v)) return DASH;
  return v < 1 ? `${integer.format(Math.max(1, Math.round(v * 1000)))} ms` : seconds(v);
}

export function count(v) {
  return isNum(v) ? integer.format(v) : DASH;
}

/** A count short enough for an axis: 950 → "950", 1200 → "1.2k", 45000 → "45k", 1.5e6 → "1.5M". */
export function compact(v) {
  if (!isNum(v)) return DASH;
  const a = Math.abs(v);
  const short = (x, unit) => `${+(x.toFixed(x < 10 ? 1 : 0))}${unit}`;
  if (a >= 1_000_000) return `${v < 0 ? "-" : ""}${short(a / 1_000_000, "M")}`;
  if (a >= 1000) return `${v < 0 ? "-" : ""}${short(a / 1000, "k")}`;
  return String(+v.toFixed(a < 10 && !Number.isInteger(v) ? 2 : 0));
}

export function percent(v) {
  return isNum(v) ? `${Math.round(v * 100)}%` : DASH;
}

/** [lo, hi] → "51–80%" */
export function interval(iv) {
  if (!Array.isArray(iv) || !isNum(iv[0]) || !isNum(iv[1])) return DASH;
  return `${Math.round(iv[0] * 100)}–${Math.round(iv[1] * 100)}%`;
}

/** Token counts: 128000 → "128k", 1048576 → "1M". */
export function tokens(v) {
  if (!isNum(v)) return DASH;
  if (v >= 1_000_000) return `${+(v / 1_000_000).toFixed(v % 1_000_000 ? 1 : 0)}M`;
  if (v >= 1000) return `${Math.round(v / 1000)}k`;
  return integer.format(v);
}

/** A model's price per million tokens: the typed pair, else the one the catalog lists (`known`). */
export function price(model) {
  const { price_in: pin, price_out: pout, currency } = prices(model);
  if (!isNum(pin) && !isNum(pout)) return DASH;
  if ((pin || 0) === 0 && (pout || 0) === 0) return "free";
  const f = (v) => (isNum(v) ? String(+v.toFixed(4)) : "?");
  return `${f(pin)} / ${f(pout)} ${currency || ""}`.trim();
}

/** The typed price pair and its currency, or the catalog's where none is typed. */
export function prices(model) {
  const known = model.known || {};
  const typed = isNum(model.price_in) || isNum(model.price_out);
  return typed || !("price_in" in known) ? model : { ...model, ...known };
}

/** A model's price in and out together, for sorting; null when no price is known. */
export function priceSum(model) {
  const { price_in: pin, price_out: pout } = prices(model);
  return (pin ?? null) === null ? null : (pin || 0) + (pout || 0);
}

const small = new Intl.NumberFormat(undefined, { maximumSignificantDigits: 2 });
const cents = new Intl.NumberFormat(undefined, { minimumFractionDigits: 2, maximumFractionDigits: 2 });

/** An amount of money with its currency: 0.000123 → "0.00012 USD", 12.3 → "12.30 EUR". */
export function money(amount, currency = "") {
  if (!isNum(amount)) return DASH;
  const text = amount === 0 ? "0" : Math.abs(amount) < 1 ? small.format(amount) : cents.format(amount);
  return `${text} ${currency}`.trim();
}

/** A message ended as a sentence, so another can follow it ("…was started. Check…"). Its
 *  start is left as it is: a server's message may open with a code such as "auth:". */
export function sentence(text) {
  const t = String(text ?? "").trim();
  return !t || /[.!?…]$/.test(t) ? t : `${t}.`;
}

export function plural(n, one, many = `${one}s`) {
  return `${count(n)} ${n === 1 ? one : many}`;
}
