// A table's rows as a CSV file the browser downloads: each cell as the table shows it (its
// words, not its markup), quoted where RFC 4180 asks for it, with a header row of the columns'
// labels.
//
// A cell that a spreadsheet would read as a formula (it begins with =, +, @ or a - that starts
// no number) is written with a leading apostrophe, so opening the file never runs what a model
// name or an answer put there.

import * as fmt from "./format.js";

/** One CSV field: quoted when it holds a comma, a quote or a line break; quotes doubled. */
export function field(value) {
  let text = value === null || value === undefined ? "" : String(value);
  if (/^[=+@]/.test(text) || /^-(?![\d.])/.test(text)) text = `'${text}`;
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

// the words of a cell as the page shows them: its text pieces apart, spaces made one
function wordsOf(content) {
  if (content === null || content === undefined || content === "") return fmt.DASH;
  if (!(content instanceof Node) && !Array.isArray(content)) return String(content);
  const parts = [];
  const walk = (node) => {
    if (Array.isArray(node)) { node.forEach(walk); return; }
    if (node === null || node === undefined || node === false) return;
    if (!(node instanceof Node)) { parts.push(String(node)); return; }
    if (node.nodeType === Node.TEXT_NODE) { parts.push(node.textContent); return; }
    if (node.getAttribute && node.getAttribute("aria-hidden") === "true") return;
    node.childNodes.forEach(walk);
  };
  walk(content);
  return parts.join(" ").replace(/\s+/g, " ").trim();
}

/** The CSV text of `rows` under `columns` (the table component's column definitions), but for
 * columns of buttons (`className` "actions") and those marked `csv: false`. */
export function toCsv(allColumns, rows) {
  const columns = allColumns.filter((c) => c.csv !== false && c.className !== "actions");
  const value = (col, row) => (col.value ? col.value(row) : row[col.key]);
  const lines = [columns.map((c) => field(c.label)).join(",")];
  for (const row of rows) {
    lines.push(columns.map((c) => field(wordsOf(c.cell ? c.cell(row) : value(c, row)))).join(","));
  }
  return `${lines.join("\r\n")}\r\n`;
}

/** Download `rows` as `<label>.csv`. */
export function saveCsv(label, columns, rows) {
  const name = `${String(label).toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-|-$/g, "") || "table"}.csv`;
  const url = URL.createObjectURL(new Blob([toCsv(columns, rows)], { type: "text/csv;charset=utf-8" }));
  const link = document.createElement("a");
  link.href = url;
  link.download = name;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 0);
}
