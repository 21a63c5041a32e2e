// A click on the Jobs ring before the app has started: its modules run once the page is parsed, then wait for the
// person and their team before they listen. Such a click is remembered here (a classic script in <head>, so it
// listens from the first paint) and app.js opens the popover once it can draw it, rather than losing the click.
// Until then the ring shows itself pressed; a second click asks the same (nothing showed yet to close).
(function () {
  var early = (window.jobsEarly = { ring: false, ready: false });
  document.addEventListener("click", function (e) {
    if (early.ready || !(e.target instanceof Element)) return;
    var ring = e.target.closest("#ring");
    if (!ring) return;
    early.ring = true;
    ring.setAttribute("aria-expanded", "true");
  });
})();
