// A model's answer as Markdown, made safe: marked (vendor/marked) turns the text into HTML, and
// DOMPurify (vendor/dompurify) keeps only inert markup, handed back as DOM nodes (never set as
// innerHTML here).
//
// Invariants: HTML a model writes is shown as text, never as markup (a <script> or an
// <img onerror> reads as what it is); an image is never loaded (the page's CSP allows no outside
// image, and an answer should not make the browser fetch anything): its alt text and address are
// shown instead; links open in a new tab without handing it this page (rel=noopener noreferrer);
// no style attribute survives (the CSP refuses inline styles); a javascript: or other unsafe
// address is dropped by the sanitiser.

import { Marked } from "../vendor/marked/marked.esm.js";
import DOMPurify from "../vendor/dompurify/purify.es.mjs";
import { h } from "./dom.js";

const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
const escaped = (text) => String(text).replace(/[&<>"']/g, (c) => ESCAPES[c]);

const parser = new Marked({
  gfm: true,
  breaks: false,
  renderer: {
    // raw HTML in the answer is text to read, not markup to run
    html: ({ text }) => escaped(text),
    image: ({ href, text }) => escaped(`[image: ${text || "no description"}${href ? ` (${href})` : ""}]`),
  },
});

const PURIFY = {
  FORBID_TAGS: ["style", "img", "svg", "math", "form", "input", "button", "textarea", "select",
    "iframe", "object", "embed", "video", "audio", "source", "picture", "link", "meta"],
  FORBID_ATTR: ["style", "id", "class", "srcset"],
  ALLOW_DATA_ATTR: false,
  RETURN_DOM_FRAGMENT: true,
};

DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A" && node.hasAttribute("href")) {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer");
  }
});

/** The answer's text as sanitised Markdown in a `.markdown` block. */
export function markdown(text, props = {}) {
  const html = parser.parse(String(text ?? ""), { async: false });
  const block = h("div", { class: "markdown", ...props });
  block.append(DOMPurify.sanitize(html, PURIFY));
  return block;
}
