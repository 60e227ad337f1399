// The navigation as a menu on narrow screens: the button opens and closes it (aria-expanded
// says which), Escape or following a link closes it and gives the focus back to the button.
// On wide screens the button is hidden by the stylesheet and the navigation is always shown.

export function navMenu(header, button, nav) {
  const setOpen = (open, { focusButton = false } = {}) => {
    header.classList.toggle("nav-open", open);
    button.setAttribute("aria-expanded", String(open));
    button.setAttribute("aria-label", open ? "Close the menu" : "Open the menu");
    if (!open && focusButton) button.focus();
  };
  const isOpen = () => header.classList.contains("nav-open");
  button.addEventListener("click", () => {
    const open = !isOpen();
    setOpen(open);
    if (open) {
      const first = nav.querySelector("a[aria-current]") || nav.querySelector("a");
      if (first) first.focus();
    }
  });
  header.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && isOpen()) {
      event.preventDefault();
      setOpen(false, { focusButton: true });
    }
  });
  // a click outside the open menu closes it, as a menu elsewhere would
  document.addEventListener("click", (event) => {
    if (isOpen() && !header.contains(event.target)) setOpen(false);
  });
  setOpen(false);
  return { close: () => setOpen(false) };
}
