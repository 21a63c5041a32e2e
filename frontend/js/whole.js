/**
 * A job's error in full, under its row: the row cuts a long error with "…", so a click or tap on the error (or
 * Enter or Space on the focused row) opens it whole, and the same again, Escape or another row's error closes it.
 * It sits in the tree's scrolling area, so it scrolls with its row and never moves the rows (they are virtual).
 */

let made = 0;

export class WholeError {
  constructor(scroller) {
    this.el = document.createElement("div");
    this.el.className = "error-whole";
    this.el.id = `error-whole-${++made}`;
    this.el.setAttribute("role", "tooltip");
    this.el.hidden = true;
    scroller.append(this.el);
    this.key = null; // the row whose error is open
  }

  /** Open the error of row `key` (at `top` px in the tree), or close it if it is the one open. */
  toggle(key, top, text) {
    if (this.key === key) { this.hide(); return; }
    this.key = key;
    this.place(top, text);
    this.el.hidden = false;
  }

  /** Follow the open row as the tree changes: its place, its latest error (none: closed). */
  place(top, text) {
    if (!text) { this.hide(); return; }
    this.el.style.top = `${top}px`;
    if (this.el.textContent !== text) this.el.textContent = text;
  }

  hide() { this.key = null; this.el.hidden = true; }
}
