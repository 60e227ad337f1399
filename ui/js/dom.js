// Building the DOM without markup strings.
//
// Invariant: text from the server (model answers, prompts, names, error messages) only ever
// reaches the page as a text node or an attribute value; nothing here parses HTML. Inline
// styles and inline event handlers are refused outright, since the page's CSP forbids both.

const SVG_NS = "http://www.w3.org/2000/svg";
const BOOLEAN_PROPS = new Set(["checked", "disabled", "selected", "hidden", "required", "readOnly",
  "multiple", "open", "indeterminate"]);

function setProps(el, props) {
  for (const [key, value] of Object.entries(props || {})) {
    if (value === null || value === undefined) continue;
    if (key === "style" || /^on[a-z]/i.test(key)) {
      throw new Error(`refused attribute ${key}: use a class or an event listener`);
    }
    if (key === "class") {
      const names = Array.isArray(value) ? value.filter(Boolean).join(" ") : value;
      if (names) el.setAttribute("class", names);
    } else if (key === "text") {
      el.textContent = String(value);
    } else if (key === "on") {
      for (const [event, fn] of Object.entries(value)) el.addEventListener(event, fn);
    } else if (key === "dataset") {
      for (const [name, v] of Object.entries(value)) el.dataset[name] = String(v);
    } else if (key === "value") {
      el.value = String(value);
    } else if (BOOLEAN_PROPS.has(key)) {
      el[key] = Boolean(value);
    } else if (value === false) {
      continue;
    } else {
      el.setAttribute(key, value === true ? "" : String(value));
    }
  }
}

export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

/** h("button", {class: "btn", on: {click}}, "Save") */
export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  setProps(el, props);
  return append(el, children);
}

/** The same for SVG elements (charts): attributes only, never style. */
export function s(tag, props, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (value === null || value === undefined) continue;
    if (key === "style" || /^on[a-z]/i.test(key)) throw new Error(`refused attribute ${key}`);
    if (key === "text") el.textContent = String(value);
    else el.setAttribute(key, String(value));
  }
  return append(el, children);
}

export function clear(el) {
  el.replaceChildren();
  return el;
}

export function replace(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

let uid = 0;
/** A fresh id for label/for and aria-describedby pairs. */
export function newId(prefix = "f") {
  uid += 1;
  return `${prefix}-${uid}`;
}
