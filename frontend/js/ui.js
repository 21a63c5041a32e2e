// Small pieces the views share: escaping, times, toasts, the context menu, dialogs, and acting with a busy state.
import { looking, markRead, remember, retell } from "./history.js";

export const esc = (s) => String(s ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));

export function ago(iso, now) {
  if (!iso) return "";
  const s = Math.max(0, Math.round((now - Date.parse(iso)) / 1000));
  if (s < 5) return "just now";
  if (s < 60) return `${s}s ago`;
  if (s < 3600) return `${Math.floor(s / 60)}m ago`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ago`;
  return `${Math.floor(s / 86400)}d ago`;
}

export function took(job) {
  if (job.status !== "completed" || !job.started_at || !job.finished_at) return "";
  const s = (Date.parse(job.finished_at) - Date.parse(job.started_at)) / 1000;
  if (s < 1) return `took ${Math.round(s * 1000)} ms`;
  if (s < 60) return `took ${s.toFixed(1)} s`;
  return `took ${Math.floor(s / 60)}m ${Math.round(s % 60)}s`;
}

// Every Intl formatter is made at its first use, never while the modules load: the page's first Intl object loads
// the browser's locale data, 40-160 ms of the main thread in Chromium's profiles of the demo's first load on a busy
// machine, which made the modules' evaluation (one task, with all the page does before its first fetch) the
// load's longest task. The locale data loads in a task of its own instead, queued here, before the first draw.
const lazily = (make) => { let made = null; return { format: (x) => (made ??= make()).format(x) }; };
const GROUPED = lazily(() => new Intl.NumberFormat());
setTimeout(() => GROUPED.format(0));

/** A count as a person reads it: thousands grouped in the browser's locale ("119,594"). */
export function count(n) {
  return GROUPED.format(n);
}

/** A count known only roughly, said as one, to two figures: "about 150,000", "about 1.2 million". */
export function about(n) {
  const rounded = Number(Number(n).toPrecision(2));
  if (rounded < 1e6) return `about ${GROUPED.format(rounded)}`;
  return `about ${new Intl.NumberFormat(undefined, { maximumSignificantDigits: 2 }).format(rounded / 1e6)} million`;
}

// The one clock's formatters, made once: a toLocale*String call builds a new Intl.DateTimeFormat every time (tens of
// microseconds), and the Submissions page formats two moments a row at every redraw: at a hundred rows that made
// the page's main-thread tasks run past 50 ms. The options are what those calls ask for (toLocaleString's defaults
// written out), so the words are the same.
const TIME = lazily(() => new Intl.DateTimeFormat([], { hour: "2-digit", minute: "2-digit", hourCycle: "h23" }));
const TIME_SECONDS = lazily(() => new Intl.DateTimeFormat([], { hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23" }));
const DATE = lazily(() => new Intl.DateTimeFormat([]));
const MOMENT = lazily(() => new Intl.DateTimeFormat([], { year: "numeric", month: "numeric", day: "numeric", hour: "numeric", minute: "numeric", second: "numeric", hourCycle: "h23" }));

const sameDay = (a, b) => a.getFullYear() === b.getFullYear() && a.getMonth() === b.getMonth() && a.getDate() === b.getDate();

/** The time of day on the one clock every page uses: the browser's locale, 24-hour ("20:16"). */
export function timeOfDay(at, { seconds = false } = {}) {
  return (seconds ? TIME_SECONDS : TIME).format(new Date(at));
}

/** A moment as a person reads it: the time of day, with the date when it is not today. */
export function clock(iso, now = Date.now()) {
  if (!iso) return "";
  const at = new Date(iso);
  const time = TIME_SECONDS.format(at);
  return sameDay(at, new Date(now)) ? time : `${DATE.format(at)} ${time}`;
}

/** Who acted on a row and when, on the page's clock: "Killed by Ada Lovelace at 20:16" (the date before the time
 * when it was not today). */
export function actedBy(verb, name, iso, now = Date.now()) {
  const at = new Date(iso);
  const when = sameDay(at, new Date(now)) ? TIME.format(at) : `${DATE.format(at)} ${TIME.format(at)}`;
  return `${verb} by ${name} at ${when}`;
}

/** A moment in full on the same clock (a tooltip's date and time). */
export function moment(iso) {
  return MOMENT.format(new Date(iso));
}

/** Set an element's text only when it changed: nothing under the pointer is replaced. */
export function setText(el, text) {
  if (el.textContent !== text) el.textContent = text;
}

export function setAttr(el, name, value) {
  if (value === null || value === undefined || value === false) { if (el.hasAttribute(name)) el.removeAttribute(name); return; }
  const v = value === true ? "" : String(value);
  if (el.getAttribute(name) !== v) el.setAttribute(name, v);
}

/** Keep `parent`'s children exactly `nodes`, in order, moving as few as there are: those that keep their order
 * among themselves (the longest such run) stay, the rest are put after the node that precedes them. A node taken
 * out and put back is laid out again from nothing (its style and boxes made anew), so a list of 100 rows where one
 * moved to the top moves that one, not the 99 under it; a hovered or focused node that stays is never taken out.
 * `moves`: at most that many are moved now, from the top (the nodes not yet in place keep theirs, those new to
 * `parent` go last): answers whether all are in place, else a later call moves on. */
export function placeChildren(parent, nodes, moves = Infinity) {
  const wanted = new Set(nodes);
  for (let at = parent.firstChild; at;) { const next = at.nextSibling; if (!wanted.has(at)) parent.removeChild(at); at = next; }
  const index = new Map();
  let i = 0;
  for (let at = parent.firstChild; at; at = at.nextSibling) index.set(at, i++);
  const stay = increasingRun(nodes.map((n) => index.get(n) ?? -1));
  let before = null;
  for (let k = 0; k < nodes.length; k++) {
    const n = nodes[k], at = before ? before.nextSibling : parent.firstChild;
    if (!stay.has(k) && (n.parentNode !== parent || at !== n)) {
      if (moves <= 0) {
        for (const rest of nodes.slice(k)) if (rest.parentNode !== parent) parent.insertBefore(rest, null);
        return false;
      }
      parent.insertBefore(n, at);
      moves--;
    }
    before = n;
  }
  return true;
}

/** The places in `xs` of its longest strictly increasing run of values that are not -1 (patience sorting). */
function increasingRun(xs) {
  const tails = []; // tails[j]: the place of the least last value of a run of length j + 1
  const back = new Array(xs.length).fill(-1);
  for (let k = 0; k < xs.length; k++) {
    if (xs[k] < 0) continue;
    let lo = 0, hi = tails.length;
    while (lo < hi) { const mid = (lo + hi) >> 1; if (xs[tails[mid]] < xs[k]) lo = mid + 1; else hi = mid; }
    back[k] = lo > 0 ? tails[lo - 1] : -1;
    tails[lo] = k;
  }
  const run = new Set();
  for (let k = tails.length ? tails[tails.length - 1] : -1; k >= 0; k = back[k]) run.add(k);
  return run;
}

// -- toasts: a strip under the page whose room is always kept (nothing moves when one comes or goes), one slot
// per kind: "outcome" (what the person's own action did: it stays until they dismiss it or act again) and
// "finish" (the finishes that reach them, summarised in one toast: notices.js). Each is also kept in the bell's
// list for an hour (history.js). One that arrives while the person looks elsewhere waits for them: its time
// starts when they are back.

// A job of theirs running longer than usual ("stuck", notices.js) is news about their jobs like a finish: it
// takes the finishes' slot (the newest of the two shows; both stay in the bell's list).
const slotOf = (kind) => (kind === "stuck" ? "finish" : kind);

const TOAST_TIME = { success: 6000, info: 6000, warning: 12000, error: 12000 };

let waitingForThePerson = false; // listening for their return (from the first toast on)

function startTimer(el) {
  clearTimeout(Number(el.dataset.timer));
  if (!waitingForThePerson) {
    waitingForThePerson = true;
    document.addEventListener("visibilitychange", backToThePage);
    window.addEventListener("focus", backToThePage);
  }
  if (!looking()) { el.dataset.waiting = ""; return; }
  delete el.dataset.waiting;
  if (el.dataset.kind === "outcome" && el.dataset.level !== "info") return; // until read or dismissed
  el.dataset.timer = String(setTimeout(() => el.remove(), TOAST_TIME[el.dataset.level] || 6000));
}

function backToThePage() {
  if (looking()) for (const el of document.querySelectorAll("#toasts .toast[data-waiting]")) startTimer(el);
}

/** A toast: `text` at `level` (success, info, warning, error; busy: until removed, and not kept). Options:
 * `detail` (what it is about, shown after the words: a trajectory's name), `open` (the detail is a button that
 * opens it), `key` (one event: kept once in the list however often it is heard), `trajectory` (its id), `kind`
 * (its slot: a new toast of a kind takes the place of the one shown). */
export function toast(text, level = "success", { detail = "", open = null, key = null, trajectory = null, kind = "outcome" } = {}) {
  const box = document.getElementById("toasts");
  const same = level === "busy" ? null
    : [...box.children].find((t) => t.dataset.kind === kind && t.dataset.text === text && t.dataset.level === level && t.dataset.detail === detail);
  if (same) { // the same words again: one toast that counts them ("×3"), newest last, its time starting again
    const count = Number(same.dataset.count) + 1;
    same.dataset.count = String(count);
    same.querySelector(".times").textContent = `×${count}`;
    box.append(same);
    same.dataset.entry = remember({ text, detail, level, key, trajectory });
    startTimer(same);
    return same;
  }
  const el = document.createElement("div");
  el.dataset.text = text;
  el.dataset.level = level;
  el.dataset.detail = detail;
  el.dataset.count = "1";
  el.dataset.kind = kind;
  el.className = `toast ${level}`;
  el.setAttribute("role", level === "warning" || level === "error" ? "alert" : "status");
  const words = document.createElement("span");
  words.className = "words";
  words.textContent = text;
  words.title = detail ? `${text} ${detail}` : text; // the strip is one line: the whole of it on hover
  if (detail) {
    const about = document.createElement(open ? "button" : "span");
    about.className = "about";
    about.textContent = detail;
    if (open) {
      about.type = "button";
      about.title = `Open ${detail}`;
      about.addEventListener("click", () => { markRead([el.dataset.entry]); el.remove(); open(); });
    }
    words.append(" ", about);
  }
  const close = document.createElement("button");
  close.className = "toast-close";
  close.setAttribute("aria-label", "Dismiss");
  close.textContent = "×";
  close.addEventListener("click", () => { if (el.dataset.entry) markRead([el.dataset.entry]); el.remove(); });
  const times = document.createElement("span");
  times.className = "times";
  el.append(words, times, close);
  // One of each kind; a busy toast lies over the outcome it may repeat ("×2"), until the result takes its place.
  if (level !== "busy") for (const other of [...box.children]) if (slotOf(other.dataset.kind) === slotOf(kind)) other.remove();
  box.append(el);
  if (level !== "busy") {
    el.dataset.entry = remember({ text, detail, level, key, trajectory });
    startTimer(el);
  }
  return el;
}

/** The same toast says newer words, in place (an outcome the clusters' reports complete): false once it is gone
 * (dismissed, or another outcome took its slot). Its entry in the bell's list says them too. */
export function retext(el, text, level) {
  if (!el.isConnected) return false;
  if (el.dataset.text === text && el.dataset.level === level) return true;
  el.dataset.text = text;
  el.dataset.level = level;
  el.className = `toast ${level}`;
  el.setAttribute("role", level === "warning" || level === "error" ? "alert" : "status");
  const words = el.querySelector(".words");
  words.textContent = text;
  words.title = text;
  if (el.dataset.entry) retell(el.dataset.entry, text, level);
  return true;
}

/** What an action's answer says, styled by what really happened (the gateway decides: `level`). */
export function showResult(ok, body) {
  if (!ok) return toast(body && body.message ? body.message : "Something went wrong", "error");
  return toast(body.message || "Done", body.level || "success");
}

let busyCount = 0;

/** Run an action's request with a busy state: a toast that says what it waits for (a cluster may take up to
 * its confirmation timeout), `aria-busy` on what it acts on, then the result's toast in its place. Resolves to
 * the answer, the toast that shows it (`shown`) and when the action started (`started`, performance.now()). */
export async function acting(what, request, target = null) {
  const started = performance.now();
  const pending = toast(`${what}: waiting for the clusters to confirm…`, "busy");
  pending.setAttribute("aria-busy", "true");
  busyCount++;
  document.body.dataset.busy = String(busyCount);
  if (target) target.setAttribute("aria-busy", "true");
  try {
    const { ok, body } = await request();
    const shown = showResult(ok, body);
    return { ok, body, shown, started };
  } catch {
    const shown = showResult(false, { message: "The gateway could not be reached" });
    return { ok: false, body: {}, shown, started };
  } finally {
    pending.remove();
    busyCount--;
    document.body.dataset.busy = String(busyCount);
    if (target) target.removeAttribute("aria-busy");
  }
}

export async function send(path, { method = "POST", body = undefined } = {}) {
  const init = { method };
  if (body !== undefined) { init.headers = { "content-type": "application/json" }; init.body = JSON.stringify(body); }
  const response = await fetch(path, init);
  const answer = await response.json().catch(() => ({}));
  return { ok: response.ok, body: answer };
}

export const post = (path) => send(path);

// -- focus: back where it came from

/** Where focus goes back to: the element, or (it was redrawn) the element that took its place. */
export function focusBack(opener) {
  if (!opener) return;
  if (opener.isConnected) { opener.focus(); return; }
  const key = opener.dataset && opener.dataset.key;
  const again = key ? document.querySelector(`[data-key="${CSS.escape(key)}"]`) : null;
  if (again) again.focus();
}

// -- the context menu

let openMenu = null;
let menuOpener = null;

export const menuOpen = () => openMenu !== null;

export function closeMenu(restore = false) {
  if (!openMenu) return;
  openMenu.remove();
  openMenu = null;
  const opener = menuOpener;
  menuOpener = null;
  if (restore) focusBack(opener);
  document.dispatchEvent(new CustomEvent("menuclosed"));
}

/** A menu of items at (x, y), kept inside the viewport. An item is [label, action] or {label, action, checked}.
 * Keyboard: arrows, Home, End, Enter, Escape; focus goes back to `opener` when it closes. */
export function menu(x, y, items, label, opener = document.activeElement) {
  closeMenu();
  const el = (openMenu = document.createElement("ul"));
  menuOpener = opener;
  el.className = "menu";
  el.setAttribute("role", "menu");
  el.setAttribute("aria-label", label);
  for (const item of items) {
    const { label: text, action, checked } = Array.isArray(item) ? { label: item[0], action: item[1] } : item;
    const li = document.createElement("li");
    li.setAttribute("role", checked === undefined ? "menuitem" : "menuitemcheckbox");
    if (checked !== undefined) li.setAttribute("aria-checked", String(checked));
    li.tabIndex = -1;
    li.textContent = text;
    li.addEventListener("click", () => { closeMenu(true); action(); });
    li.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); li.click(); } });
    el.append(li);
  }
  el.addEventListener("keydown", (e) => {
    const all = [...el.children];
    const i = all.indexOf(document.activeElement);
    const to = { ArrowDown: (i + 1) % all.length, ArrowUp: (i - 1 + all.length) % all.length, Home: 0, End: all.length - 1 }[e.key];
    if (to !== undefined) { e.preventDefault(); all[to].focus(); }
    if (e.key === "Escape") { e.preventDefault(); e.stopPropagation(); closeMenu(true); }
    if (e.key === "Tab") { e.preventDefault(); closeMenu(true); }
  });
  document.body.append(el);
  // Inside the viewport, whatever the width (through the CSSOM: the policy refuses style attributes).
  const r = el.getBoundingClientRect();
  el.style.left = `${Math.max(4, Math.min(x, innerWidth - r.width - 4))}px`;
  el.style.top = `${Math.max(4, y + r.height > innerHeight - 4 ? y - r.height : y)}px`;
  el.firstChild.focus();
}

/** A menu under the element it belongs to (a menu button, or a row opened by keyboard). */
export function menuAt(anchor, items, label) {
  const r = anchor.getBoundingClientRect();
  menu(r.left + Math.min(40, r.width / 2), r.bottom, items, label, anchor);
}

/** The keys that open a context menu from the keyboard. */
export const isMenuKey = (e) => e.key === "ContextMenu" || (e.key === "F10" && e.shiftKey);

// -- dialogs: native modal <dialog>s (focus stays inside, Escape cancels), focus back to the opener on close

let openDialogs = 0;
export const dialogOpen = () => openDialogs > 0;
/** A modal dialog built elsewhere (the lifecycle diagram): lists behind it hold still until it closes. */
export function countDialog(dlg) {
  openDialogs++;
  dlg.addEventListener("close", () => { openDialogs--; }, { once: true });
}
let dialogSeq = 0;

/** A modal form. `fields` is HTML; `check(form)` returns an error message or null. Resolves with the form's
 * data, or null when cancelled. */
export function formDialog({ title, fields, submit, check = () => null, opener = document.activeElement, danger = false }) {
  const id = `dialog-${++dialogSeq}`;
  const dlg = document.createElement("dialog");
  dlg.className = "dialog";
  dlg.setAttribute("aria-labelledby", `${id}-title`);
  dlg.innerHTML = `<form method="dialog" novalidate>
    <h2 id="${id}-title">${esc(title)}</h2>
    <div class="dialog-body">${fields}</div>
    <p class="dialog-error" id="${id}-error" role="alert" hidden></p>
    <div class="dialog-buttons"><button type="button" value="cancel" class="cancel">Cancel</button>
      <button type="submit" value="ok" class="${danger ? "danger" : "primary"}">${esc(submit)}</button></div>
  </form>`;
  document.body.append(dlg);
  openDialogs++;
  const form = dlg.querySelector("form");
  const error = dlg.querySelector(".dialog-error");
  for (const input of form.querySelectorAll("input, select")) input.setAttribute("aria-describedby", `${id}-error`);
  return new Promise((resolve) => {
    let result = null;
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      const problem = check(form);
      for (const input of form.querySelectorAll("input, select")) input.setAttribute("aria-invalid", String(Boolean(problem)));
      if (problem) { error.textContent = problem; error.hidden = false; form.querySelector("input, select")?.focus(); return; }
      result = Object.fromEntries(new FormData(form).entries());
      dlg.close();
    });
    dlg.querySelector(".cancel").addEventListener("click", () => dlg.close());
    dlg.addEventListener("close", () => {
      dlg.remove();
      openDialogs--;
      focusBack(opener);
      document.dispatchEvent(new CustomEvent("menuclosed"));
      resolve(result);
    });
    dlg.showModal();
    (form.querySelector("input, select") || form.querySelector(".cancel")).focus(); // a question starts on Cancel
  });
}

/** Are you sure? Resolves true when confirmed. */
export async function confirmDialog({ title, text, confirm, opener = document.activeElement }) {
  const answer = await formDialog({ title, fields: `<p>${esc(text)}</p>`, submit: confirm, opener, danger: true });
  return answer !== null;
}
