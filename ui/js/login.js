// The login page: one field for the admin token, POST /api/login, then back to the dashboard
// (to the page that asked for the login, when there was one).

import { errorFrom, NEXT_KEY } from "./api.js";
import { h, replace } from "./dom.js";
import { sentence } from "./format.js";

const form = document.getElementById("login-form");
const token = document.getElementById("token");
const box = document.getElementById("login-message");
const submit = document.getElementById("login-submit");

function say(kind, text) {
  clearInterval(ticking);
  replace(box, h("div", { class: ["notice", kind], role: kind === "error" ? "alert" : "status" },
    h("p", { class: "grow", text })));
}

// A refusal for too many tries says when to try again, and that wait counts down each second
// (the server's own "try again in N s" is taken out: the count replaces it).
let ticking = null;

function countDown(message, seconds) {
  clearInterval(ticking);
  const reason = sentence(message.replace(/[;:,]?\s*try again in \d+ s\.?$/i, ""));
  const wait = Number.isFinite(seconds) && seconds > 0 ? seconds : null;
  if (wait === null) { say("error", reason); return; }
  const ends = Date.now() + wait * 1000;
  const left = h("span", { "data-testid": "login-wait" });
  const tick = () => {
    const s = Math.max(0, Math.ceil((ends - Date.now()) / 1000));
    left.textContent = s ? `Try again in ${s} s.` : "You can try again now.";
    if (!s) clearInterval(ticking);
  };
  tick();
  replace(box, h("div", { class: ["notice", "error"], role: "alert" },
    h("p", { class: "grow" }, reason, " ", left)));
  ticking = setInterval(tick, 1000);
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
        countDown(err.message, Number.parseInt(err.retryAfter, 10));
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

// Until now the button was disabled (login.html): a submit before this handler was attached would
// have been the browser's own, sending the token where it must not go.
submit.disabled = false;
