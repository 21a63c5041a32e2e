// The theme a person chose in Account (System, Light or Dark), kept in this browser's localStorage, set on <html>
// before the first paint: a classic script in <head> (not a module, which would run after it; the
// Content-Security-Policy refuses an inline one). "System" leaves the attribute off: the stylesheet follows
// prefers-color-scheme. account.js writes the same key.
(function () {
  try {
    var theme = localStorage.getItem("theme");
    if (theme === "light" || theme === "dark") document.documentElement.dataset.theme = theme;
  } catch (e) { /* storage refused: the system's setting */ }
})();
