// Loaded as a classic script in <head>, before the page paints, so a dark theme never
// flashes light. [data-theme] is the choice (light, dark or system); [data-scheme] the colours
// in use, which follow the system's while the choice is "system".
(function () {
  var root = document.documentElement;
  var choice = "system";
  try {
    choice = localStorage.getItem("panelist.theme") || "system";
  } catch (e) {
    choice = "system";
  }
  if (choice !== "light" && choice !== "dark") choice = "system";
  root.setAttribute("data-theme", choice);
  var media = window.matchMedia ? window.matchMedia("(prefers-color-scheme: dark)") : null;
  function scheme() {
    var theme = root.getAttribute("data-theme");
    var dark = theme === "dark" || (theme === "system" && media !== null && media.matches);
    root.setAttribute("data-scheme", dark ? "dark" : "light");
  }
  scheme();
  if (media !== null) media.addEventListener("change", scheme);
  new MutationObserver(scheme).observe(root, { attributes: true, attributeFilter: ["data-theme"] });
})();
