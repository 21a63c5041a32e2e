// A click on the Jobs ring before the app has started: its modules run once the page is parsed, then wait for the
// person and their team before they listen. Such a click is remembered here (a classic script in <head>, so it
// listens from the first paint) and app.js opens the popover once it can draw it, rather than losing the click.
(function () {
  var early = (window.jobsEarly = { ring: 0, ready: false });
  document.addEventListener("click", function (e) {
    if (early.ready || !(e.target instanceof Element)) return;
    var ring = e.target.closest("#ring");
    if (!ring) return;
    early.ring++; // a second click takes the first back
    ring.setAttribute("aria-expanded", String(early.ring % 2 === 1));
  });
})();
