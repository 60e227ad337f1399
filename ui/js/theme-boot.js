// Loaded as a classic script in <head>, before the page paints, so a dark theme never
// flashes light. "system" is left to CSS (prefers-color-scheme).
(function () {
  var choice = "system";
  try {
    choice = localStorage.getItem("panelist.theme") || "system";
  } catch (e) {
    choice = "system";
  }
  if (choice !== "light" && choice !== "dark") choice = "system";
  document.documentElement.setAttribute("data-theme", choice);
})();
