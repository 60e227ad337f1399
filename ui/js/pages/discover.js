// Discover: the models each endpoint serves that the roster does not hold yet, free ones first
// (the order `panelist discover` prints), with an Add button that registers one exactly as
// `panelist discover --add` does. A refusal shows the server's own message beside the list.
// Names and ids come from endpoints, so they reach the page as text only.

import { api } from "../api.js";
import { h, replace } from "../dom.js";
import * as fmt from "../format.js";
import { button, emptyState, notice, pageHead, toast } from "../ui.js";

export const title = "Discover";

function yesNo(v) {
  return v === true ? "yes" : v === false ? "no" : fmt.DASH;
}

function row(model, onAdd) {
  const f = model.facts || {};
  const add = button("Add", () => onAdd(model, add), {
    small: true, kind: "primary", "aria-label": `Add ${model.id} from ${model.endpoint}`,
  });
  return h("tr", { dataset: { endpoint: model.endpoint, id: model.id } },
    h("td", { text: model.endpoint }),
    h("td", { class: "mono", text: model.id }),
    h("td", { class: "numeric", text: fmt.tokens(f.context) }),
    h("td", { text: fmt.price(f) }),
    h("td", { text: yesNo(f.vision) }),
    h("td", { text: yesNo(f.tools) }),
    h("td", null, add));
}

export async function render(main, ctx) {
  const status = h("div", { "data-testid": "discover-status" });
  const body = h("div");
  replace(main, pageHead("Discover",
    "Models your endpoints serve that are not on the roster yet. Free ones come first."),
  status, body);

  async function load() {
    const found = await api.get("/api/discover", { signal: ctx.signal });
    if (!ctx.active) return;
    const failed = (found.failed || []).map((f) => notice("error", `${f.endpoint} was not read`, f.error));
    if (!found.models.length) {
      replace(body, failed, emptyState("Nothing new to add",
        "Every model your endpoints list is on the roster already."));
      return;
    }
    const table = h("table", null,
      h("caption", { class: "visually-hidden", text: "Models not on the roster" }),
      h("thead", null, h("tr", null,
        ["Endpoint", "Served id", "Window", "Price", "Vision", "Tools", ""].map(
          (label) => h("th", { scope: "col", text: label })))),
      h("tbody", null, found.models.map((m) => row(m, addModel))));
    replace(body, failed, h("div", { class: "table-wrap", role: "region",
      "aria-label": "Models not on the roster", tabindex: "0" }, table));
  }

  async function addModel(model, btn) {
    btn.disabled = true;
    replace(status);
    try {
      await api.post("/api/discover/add", { endpoint: model.endpoint, served: model.id },
        { signal: ctx.signal });
      toast(`Added ${model.id} from ${model.endpoint}.`);
      await load();
    } catch (err) {
      if (!ctx.active) return;
      replace(status, notice("error", `${model.id} was not added`, err.message));
      btn.disabled = false;
    }
  }

  await load();
}
