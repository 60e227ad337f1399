// Connect a provider by signing in (POST /api/endpoints/connect): the server waits on a
// loopback port of its own machine for the provider's redirect, so the sign-in page must be
// opened by a browser on that machine. The page follows the sign-in by its id until it is done,
// failed or cancelled; closing the dialog while it waits cancels it. No reply carries the key.

import { api, seg } from "./api.js";
import { h, replace } from "./dom.js";
import { button, clearFieldErrors, field, input, notice, openDialog, select, showFieldError, toast } from "./ui.js";

const POLL_MS = 1000;

export function connectDialog(onDone) {
  openDialog({ title: "Connect a provider", sub: "Sign in to the provider instead of pasting a key." }, ({ close, onClose }) => {
    const name = input({ name: "name", required: true, maxlength: 48, placeholder: "openrouter" });
    const provider = select([], null, { name: "provider" });
    const status = h("div", { class: "stack", "aria-live": "polite" });
    const start = button("Sign in", null, { kind: "primary", type: "submit" });
    let waiting = null; // the id of the sign-in that waits, if any
    let timer = null;

    api.get("/api/providers").then((r) => {
      replace(provider, ...(r.data || []).map((p) => h("option", { value: p.name }, `${p.name} (${p.base_url})`)));
      if (!name.value && r.data && r.data[0]) name.value = r.data[0].name;
    }, (err) => replace(status, notice("error", "Could not list the providers", err.message)));

    const follow = async () => {
      timer = null;
      if (!waiting) return;
      try {
        const r = await api.get(`/api/endpoints/connect/${seg(waiting)}`);
        if (r.state === "waiting") { timer = setTimeout(follow, POLL_MS); return; }
        waiting = null;
        start.disabled = false;
        if (r.state === "done") {
          replace(status, notice("ok", `Signed in: endpoint ${r.result.endpoint} is ready`,
            `Its key is stored as ${r.result.key_env} in ${r.result.key_file}, outside the data folder.`
            + (r.result.environment_wins ? ` ${r.result.key_env} is also set in the server's environment, which is used instead.` : "")));
          toast(`Connected ${r.result.endpoint}.`);
          onDone(r.result.endpoint);
        } else {
          replace(status, notice("error", r.state === "cancelled" ? "Sign-in cancelled" : "Sign-in failed", r.error || "Nothing was stored."));
        }
      } catch (err) {
        timer = setTimeout(follow, POLL_MS * 3); // a dropped poll: the sign-in goes on server-side
        replace(status, notice("error", "Lost touch with the server; still trying", err.message));
      }
    };

    const form = h("form", { class: "form", novalidate: true, "aria-label": "Connect a provider" },
      h("div", { class: "form-grid" },
        field("Endpoint name", name, { hint: "Lower-case: the endpoint to create, or to sign in again." }),
        field("Provider", provider, { hint: "From config/providers.json." })),
      status);
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      clearFieldErrors(form);
      start.disabled = true;
      try {
        const r = await api.post("/api/endpoints/connect", { name: name.value.trim(), provider: provider.value });
        waiting = r.id;
        const link = h("a", { href: r.auth_url, target: "_blank", rel: "noopener noreferrer", class: "btn primary" }, "Open the sign-in page");
        replace(status, notice("", "Waiting for the sign-in",
          `Open the page, sign in and approve; the provider then sends this browser back to 127.0.0.1:${r.port}, where the server listens (for ${Math.round(r.timeout)} s). It must be this machine's browser.`,
          link));
        timer = setTimeout(follow, POLL_MS);
      } catch (err) {
        start.disabled = false;
        replace(status, notice("error", "Could not start the sign-in", showFieldError(form, err) ? "Fix the marked field." : err.message));
      }
    });
    start.addEventListener("click", () => form.requestSubmit());
    onClose(() => {
      if (timer) clearTimeout(timer);
      if (waiting) api.del(`/api/endpoints/connect/${seg(waiting)}`).catch(() => {});
      waiting = null;
    });
    return { body: form, foot: [button("Close", close), start] };
  });
}
