// The login page: one field for the admin token, POST /api/login, then back to the dashboard
// (to the page that asked for the login, when there was one).

import { errorFrom, NEXT_KEY } from "./api.js";
import { h, replace } from "./dom.js";
import { sentence } from "./format.js";

const form = document.getElementById("login-form");
const token = document.getElementById("token");
const message = document.getElementById("login-message");
const submit = document.getElementById("login-submit");

function say(kind, text) {
  replace(message, h("div", { class: ["notice", kind], role: kind === "error" ? "alert" : "status" },
    h("p", { class: "grow", text })));
}

function destination() {
  let next = "";
  try {
    next = sessionStorage.getItem(NEXT_KEY) || "";
    sessionStorage.removeItem(NEXT_KEY);
  } catch {
    next = "";
  }
  return /^#\/[a-z-]*$/.test(next) ? `/${next}` : "/";
}

form.addEventListener("submit", async (event) => {
  event.preventDefault();
  const value = token.value.trim();
  if (!value) {
    token.setAttribute("aria-invalid", "true");
    say("error", "Type the admin token first.");
    token.focus();
    return;
  }
  token.removeAttribute("aria-invalid");
  submit.disabled = true;
  say("", "Checking…");
  try {
    const response = await fetch("/api/login", {
      method: "POST", credentials: "same-origin", cache: "no-store",
      headers: { "Content-Type": "application/json", Accept: "application/json" },
      body: JSON.stringify({ token: value }),
    });
    if (!response.ok) {
      const err = errorFrom(response, await response.text().catch(() => ""));
      // the server's message may already say when to try again: never say it twice
      if (response.status === 429) {
        const wait = err.retryAfter && !/try again/i.test(err.message) ? ` Try again in ${err.retryAfter} s.` : "";
        say("error", `${sentence(err.message)}${wait}`);
      } else if (response.status === 401) {
        say("error", `${sentence(err.message)} Check the token and try again.`);
      } else {
        say("error", sentence(err.message));
      }
      token.setAttribute("aria-invalid", "true");
      token.select();
      return;
    }
    token.value = "";
    location.assign(destination());
  } catch {
    say("error", "The dashboard server could not be reached. Is it still running?");
  } finally {
    submit.disabled = false;
  }
});
