// A table that stays readable at hundreds of rows: sticky header, a filter box, columns sorted
// by clicking their header (aria-sort tells assistive technology which way), and a count of
// what is shown, and Download CSV for the rows the filter keeps (csv.js). Rows are rebuilt in
// one fragment per change; filtering waits for typing to pause.

import { saveCsv } from "./csv.js";
import { h, newId, replace } from "./dom.js";
import * as fmt from "./format.js";

// rows drawn at first: more than the tallest box (70% of the window) shows, and the next
// chunk comes when they scroll near, so only what is near the view is laid out
const FIRST = 40;
const CHUNK = 100;

// one collator for every comparison: localeCompare with options builds a new one per call
const COLLATOR = new Intl.Collator(undefined, { numeric: true, sensitivity: "base" });

/**
 * columns: [{key, label, value(row) → sortable value, cell(row) → Node|string, numeric,
 *            sortable (default true), filter (default true), search(row) → text the filter
 *            matches (default: the value), className, title (the header's hover text: what
 *            the column sorts by when that is not what it shows), firstSort ("asc" or "desc":
 *            the way a first click sorts; default: numbers descending, the rest ascending)}]
 */
export function dataTable({ columns, rows = [], label, empty = "Nothing here yet.",
  filterLabel = "Filter", filterHint = "", sort = null, short = false, rowId = null }) {
  let data = rows;
  let sortKey = sort ? sort.key : null;
  let sortDir = sort ? sort.dir : "asc";
  let needle = "";

  const filterId = newId("filter");
  const filter = h("input", {
    type: "search", id: filterId, placeholder: filterHint || "Type to filter",
    autocomplete: "off", spellcheck: "false",
  });
  const shown = h("span", { class: "muted small", "aria-live": "polite" });
  const download = h("button", {
    type: "button", class: "btn small", title: "The rows the filter keeps, in the order shown, as a CSV file",
    on: { click: () => saveCsv(label || "table", columns, current) },
  }, "Download CSV");
  const heads = columns.map((col) => {
    const th = h("th", { scope: "col", class: col.numeric ? "numeric" : null, title: col.title || null });
    if (col.sortable === false) {
      th.append(col.label);
    } else {
      th.setAttribute("aria-sort", "none");
      th.append(h("button", {
        type: "button", class: "sort-btn",
        on: { click: () => setSort(col.key) },
      }, col.label, h("span", { class: "arrow", "aria-hidden": "true" }, "↕")));
    }
    return th;
  });
  const tbody = h("tbody");
  const table = h("table", null,
    label ? h("caption", { class: "visually-hidden", text: label }) : null,
    h("thead", null, h("tr", null, heads)), tbody);
  const hint = h("p", { class: "scroll-hint muted small", hidden: true },
    "More columns to the right: scroll the table sideways (swipe, Shift + wheel, or the arrow keys once it has the focus).");
  const wrap = h("div", { class: ["table-wrap", short && "short"], tabindex: "0", role: "region", "aria-label": label || "table" }, table);
  const el = h("div", { class: "data-table" },
    h("div", { class: "table-tools" },
      h("div", { class: "row" }, h("label", { for: filterId, class: "visually-hidden", text: filterLabel }), filter),
      h("div", { class: "row" }, shown, download)),
    hint, wrap);

  // a table wider than its box says so, and shades the edge that hides columns, until the
  // last column has been scrolled into view
  function showOverflow() {
    const hidden = wrap.scrollWidth - wrap.clientWidth;
    const more = hidden > 1 && wrap.scrollLeft < hidden - 1;
    hint.hidden = !(hidden > 1);
    wrap.classList.toggle("more-right", more);
    wrap.classList.toggle("more-left", hidden > 1 && wrap.scrollLeft > 1);
  }
  wrap.addEventListener("scroll", showOverflow, { passive: true });
  if (typeof ResizeObserver === "function") new ResizeObserver(showOverflow).observe(wrap);

  let timer = null;
  filter.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(() => { needle = filter.value.trim().toLowerCase(); render(); }, 120);
  });

  function setSort(key) {
    if (sortKey === key) sortDir = sortDir === "asc" ? "desc" : "asc";
    else {
      const col = columns.find((c) => c.key === key);
      sortKey = key;
      sortDir = col.firstSort || (col.numeric ? "desc" : "asc");
    }
    render();
  }

  function valueOf(col, row) {
    return col.value ? col.value(row) : row[col.key];
  }

  function textOf(row) {
    if (!row.__text) {
      row.__text = columns.filter((c) => c.filter !== false)
        .map((c) => { const v = c.search ? c.search(row) : valueOf(c, row); return v === null || v === undefined ? "" : String(v); })
        .join(" ").toLowerCase();
    }
    return row.__text;
  }

  function compare(a, b) {
    // empty values sort last whichever way, so "no data" never crowds the top
    const an = a === null || a === undefined || a === "";
    const bn = b === null || b === undefined || b === "";
    if (an || bn) return an === bn ? 0 : an ? 1 : -1;
    const r = typeof a === "number" && typeof b === "number" ? a - b : COLLATOR.compare(String(a), String(b));
    return sortDir === "asc" ? r : -r;
  }

  function render() {
    let list = needle ? data.filter((r) => textOf(r).includes(needle)) : data.slice();
    if (sortKey) {
      const col = columns.find((c) => c.key === sortKey);
      list.sort((x, y) => compare(valueOf(col, x), valueOf(col, y)));
    }
    heads.forEach((th, i) => {
      const col = columns[i];
      if (col.sortable === false) return;
      const state = col.key === sortKey ? (sortDir === "asc" ? "ascending" : "descending") : "none";
      th.setAttribute("aria-sort", state);
      th.querySelector(".arrow").textContent = state === "ascending" ? "↑" : state === "descending" ? "↓" : "↕";
    });
    current = list;
    drawn = 0;
    replace(tbody);
    if (!list.length) {
      tbody.append(h("tr", { class: "table-empty" },
        h("td", { colspan: columns.length }, data.length ? "No row matches the filter." : empty)));
    }
    drawMore(FIRST);
    showOverflow();
    shown.textContent = data.length === list.length
      ? `${fmt.count(data.length)} ${data.length === 1 ? "row" : "rows"}`
      : `${fmt.count(list.length)} of ${fmt.count(data.length)} shown`;
  }

  // Rows are drawn a chunk at a time, the next chunk when the last rows scroll into view (or
  // on the "Show more" button): laying out 500 rows at once costs more than reading them.
  let current = [];
  let drawn = 0;
  const moreButton = h("button", { type: "button", class: "btn small", on: { click: () => drawMore() } });
  const sentinel = h("tr", { class: "table-more" }, h("td", { colspan: columns.length }, moreButton));
  const observer = typeof IntersectionObserver === "function"
    ? new IntersectionObserver((entries) => { if (entries.some((e) => e.isIntersecting)) drawMore(); },
      { root: wrap, rootMargin: "400px" })
    : null;

  function rowFor(row) {
    const tr = h("tr", rowId ? { dataset: { id: rowId(row) } } : null);
    for (const col of columns) {
      const content = col.cell ? col.cell(row) : valueOf(col, row);
      tr.append(h("td", { class: [col.numeric && "numeric", col.className] },
        content === null || content === undefined || content === "" ? fmt.DASH : content));
    }
    return tr;
  }

  function drawMore(size = CHUNK) {
    const frag = document.createDocumentFragment();
    const end = Math.min(current.length, drawn + size);
    for (let i = drawn; i < end; i += 1) frag.append(rowFor(current[i]));
    drawn = end;
    sentinel.remove();
    tbody.append(frag);
    if (drawn < current.length) {
      moreButton.textContent = `Show more (${fmt.count(current.length - drawn)} left)`;
      tbody.append(sentinel);
      if (observer) { observer.unobserve(sentinel); observer.observe(sentinel); }
    }
  }

  render();
  return {
    el,
    filter,
    update(rows2) { data = rows2; render(); },
  };
}
