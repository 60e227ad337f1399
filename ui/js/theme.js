// The theme: "light", "dark" or "system", kept in localStorage and shown as [data-theme] on
// <html>; theme-boot.js keeps [data-scheme] (the colours in use) in step with it and, on
// "system", with prefers-color-scheme.

const KEY = "panelist.theme";
export const THEMES = [["light", "Light"], ["dark", "Dark"], ["system", "Same as the system"]];

export function getTheme() {
  try {
    const v = localStorage.getItem(KEY);
    return v === "light" || v === "dark" ? v : "system";
  } catch {
    return "system";
  }
}

export function setTheme(choice) {
  const value = choice === "light" || choice === "dark" ? choice : "system";
  try {
    if (value === "system") localStorage.removeItem(KEY);
    else localStorage.setItem(KEY, value);
  } catch {
    /* storage off: the choice lasts until the page is closed */
  }
  document.documentElement.setAttribute("data-theme", value);
  window.dispatchEvent(new CustomEvent("panelist:theme", { detail: value }));
}

/** Whether the page is dark right now (for charts that need colours in code). */
export function isDark() {
  return document.documentElement.getAttribute("data-scheme") === "dark";
}

/** Call fn whenever the colours change: a new choice, or the system's while on "system". */
export function onThemeChange(fn) {
  const media = window.matchMedia("(prefers-color-scheme: dark)");
  const onMedia = () => { if (getTheme() === "system") fn(); };
  window.addEventListener("panelist:theme", fn);
  media.addEventListener("change", onMedia);
  return () => {
    window.removeEventListener("panelist:theme", fn);
    media.removeEventListener("change", onMedia);
  };
}

/** A CSS custom property's current value, e.g. cssVar("--chart-1"). */
export function cssVar(name) {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
}
