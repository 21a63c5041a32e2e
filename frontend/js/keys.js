// Keyboard shortcuts: the one table that binds them. The lists (the Submissions page's rows, the popover's
// trajectories, the dashboard's cards, the panel's jobs and analyses) read a key's action from here, and the `?` overlay lists
// this same table, so what it says cannot drift from what the keys do.
//
// A shortcut never takes a key while the person types (an input, a select, a textarea, an editable element) or
// holds Ctrl, Alt or Meta: those keys are theirs and the browser's.
import { countDialog, dialogOpen, focusBack, menuOpen } from "./ui.js";

/** [action, the keys (as KeyboardEvent.key; "Shift+F10" names a held Shift), where, what it does]. */
export const SHORTCUTS = [
  ["down", ["j", "ArrowDown"], "Lists", "Move to the next row"],
  ["up", ["k", "ArrowUp"], "Lists", "Move to the previous row"],
  ["first", ["Home"], "Lists", "Move to the first row"],
  ["last", ["End"], "Lists", "Move to the last row"],
  ["select", ["x", " "], "Submissions", "Select or unselect the row (Shift with a move: select a range)"],
  ["open", ["Enter", "o"], "Lists", "Open the row: a submission's tasks, a trajectory's jobs"],
  ["act", ["a", "ContextMenu", "Shift+F10"], "Lists", "Actions on the selected rows (the row's menu)"],
  ["retry", ["r"], "Analyses", "Retry the analysis's failed frames"],
  ["delete", ["Delete"], "Analyses", "Delete the analysis (it asks first)"],
  ["search", ["/"], "Pages", "Search the page's list (the popover's when it is open)"],
  ["close", ["Escape"], "Everywhere", "Close the menu, dialog, popover or panel"],
  ["help", ["?"], "Everywhere", "Show these shortcuts"],
];

const BY_KEY = new Map();
for (const [action, keys] of SHORTCUTS) for (const k of keys) BY_KEY.set(k, action);

/** Whether the event's target takes typed keys (its keys are never shortcuts). */
export function typing(e) {
  const t = e.target;
  if (!(t instanceof Element)) return false;
  return t.matches("input, select, textarea, [contenteditable=''], [contenteditable=true]") || t.isContentEditable;
}

/** The action a key press asks for, or null: not while typing, nor with Ctrl, Alt or Meta held. Shift is part of
 * the key itself ("?", "J" are not "j"), and it extends a move into a selection on the Submissions page. */
export function actionOf(e) {
  if (e.ctrlKey || e.altKey || e.metaKey || e.isComposing || typing(e)) return null;
  if (e.shiftKey && e.key === "F10") return BY_KEY.get("Shift+F10") || null;
  return BY_KEY.get(e.key) || null;
}

/** The name a key is shown with in the overlay. */
function keyName(k) {
  return { " ": "Space", ArrowDown: "↓", ArrowUp: "↑", ContextMenu: "Menu key", Delete: "Del", Escape: "Esc" }[k] || k;
}

/** The overlay: a modal dialog listing every shortcut (focus stays inside it; Escape or Close closes it, and focus
 * goes back to where it was). */
export function showShortcuts(opener = document.activeElement) {
  if (document.querySelector("dialog.shortcuts")) return;
  const dlg = document.createElement("dialog");
  dlg.className = "dialog shortcuts";
  dlg.setAttribute("aria-labelledby", "shortcuts-title");
  const rows = SHORTCUTS.map(([action, keys, where, what]) => `<tr data-action="${action}"><td>${keys
    .map((k) => `<kbd>${keyName(k)}</kbd>`).join(" or ")}</td><td>${what}</td><td class="quiet">${where}</td></tr>`).join("");
  dlg.innerHTML = `<h2 id="shortcuts-title">Keyboard shortcuts</h2>
    <p class="quiet small">Keys are not taken while you type in a field, or with Ctrl, Alt or ⌘ held.</p>
    <div class="table-scroll" tabindex="0" role="region" aria-label="The shortcuts"><table class="shortcuts-table"><thead><tr><th scope="col">Keys</th><th scope="col">Does</th>
      <th scope="col">Where</th></tr></thead><tbody>${rows}</tbody></table></div>
    <div class="dialog-buttons"><button type="button" class="primary close">Close</button></div>`;
  document.body.append(dlg);
  countDialog(dlg);
  dlg.addEventListener("keydown", (e) => {
    if (e.key === "Escape") e.stopPropagation(); // the browser closes it
    if (e.key !== "Tab") return;
    // Tab and Shift+Tab go round its controls: a modal dialog alone would let focus leave for the browser's own.
    const stops = [...dlg.querySelectorAll("button, [href], input, select, [tabindex]:not([tabindex='-1'])")];
    const i = stops.indexOf(document.activeElement);
    e.preventDefault();
    stops[(i + (e.shiftKey ? -1 : 1) + stops.length) % stops.length].focus();
  });
  dlg.querySelector(".close").addEventListener("click", () => dlg.close());
  dlg.addEventListener("close", () => {
    dlg.remove();
    focusBack(opener);
    document.dispatchEvent(new CustomEvent("menuclosed")); // lists that waited catch up
  });
  dlg.showModal();
  dlg.querySelector(".close").focus();
}

/** The rows the lists' own keys move between. */
export const ROWS = "[data-sub], [data-head], [data-card], [data-key], [data-analysis]";

/** The page-wide keys: `?` opens the overlay; `/` focuses the search; a move key with no row focused focuses the
 * list's first row. `lists()` returns the list in front (the popover's when open, else the page's):
 * { search: input, rows: () => [focusable rows] } or null. */
export function installShortcuts(lists) {
  document.addEventListener("keydown", (e) => {
    if (e.defaultPrevented || dialogOpen() || menuOpen()) return;
    const action = actionOf(e);
    if (action === "help") { e.preventDefault(); showShortcuts(); return; }
    const list = lists();
    if (!list) return;
    if (action === "search" && list.search) { e.preventDefault(); list.search.focus(); list.search.select(); return; }
    const move = action === "down" || action === "up" || action === "first" || action === "last";
    const onRow = e.target instanceof Element && e.target.closest(ROWS);
    // With no row focused: j and k go to the list from anywhere, the arrows only from the page itself (on a
    // button or link they keep their own meaning).
    if (move && !onRow && (e.target === document.body || e.key.length === 1)) {
      const rows = list.rows();
      if (!rows.length) return;
      e.preventDefault();
      rows[action === "up" || action === "last" ? rows.length - 1 : 0].focus();
    }
  });
}
