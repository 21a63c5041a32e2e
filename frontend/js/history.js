// The toasts of the last hour, kept so that a missed one can be found (the bell's list): read or unread, in the
// browser's storage (a reload, another tab of the same person), newest first.
//
// A toast is born read when the person is looking at the page (it is visible and has focus), unread when it
// arrives while they look elsewhere; it is read once they open the list, or dismiss or open the toast itself.

const KEPT_FOR = 3600 * 1000; // ms: an hour
const MAX_ENTRIES = 200; // whatever the rate of toasts, the list and its storage stay small

let owner = null; // the signed-in person's id: each person's list is their own (null: memory only)
let entries = []; // { id, key, text, detail, level, at, read, count, trajectory }
const listeners = new Set();

/** The person is looking at the page: visible, and focused (not another window or tab). */
export const looking = () => document.visibilityState === "visible" && document.hasFocus();

const storageKey = () => `jobs.toasts.${owner}`;

function load() {
  if (owner === null) return;
  try {
    const saved = JSON.parse(localStorage.getItem(storageKey()) || "[]");
    entries = Array.isArray(saved) ? saved.filter((e) => e && typeof e.text === "string" && Number.isFinite(e.at)) : [];
  } catch {
    entries = [];
  }
}

function save() {
  if (owner === null) return;
  try { localStorage.setItem(storageKey(), JSON.stringify(entries)); } catch { /* full or refused: memory only */ }
}

function changed() { for (const fn of listeners) fn(); }

/** Whose list: read it from storage, and follow what the person's other tabs add. */
export function ownHistory(userId) {
  owner = userId;
  load();
  prune();
  window.addEventListener("storage", (e) => { if (e.key === storageKey()) { load(); changed(); } });
  changed();
}

/** `fn()` hears every change of the list (an entry added, read, dropped). */
export function onHistory(fn) { listeners.add(fn); return () => listeners.delete(fn); }

/** Drop what is older than an hour (at most MAX_ENTRIES are kept). */
export function prune(now = Date.now()) {
  const kept = entries.filter((e) => now - e.at < KEPT_FOR).slice(0, MAX_ENTRIES);
  if (kept.length !== entries.length) { entries = kept; save(); changed(); }
}

/** The last hour's toasts, newest first. */
export function history(now = Date.now()) {
  prune(now);
  return entries;
}

export const unreadCount = () => entries.reduce((n, e) => n + (e.read ? 0 : 1), 0);

/** Keep a toast. `key` names one event (a trajectory's finish): heard again (another tab of the person), it is
 * not listed twice. The same words as the newest entry count on it ("×3"), as the toasts do. Returns its id. */
export function remember({ text, detail = "", level, key = null, trajectory = null, read = looking() }) {
  load(); // another tab may have written since
  if (key !== null) {
    const seen = entries.find((e) => e.key === key);
    if (seen) return seen.id;
  }
  const now = Date.now();
  const newest = entries[0];
  if (newest && key === null && newest.key === null && newest.text === text && newest.detail === detail && newest.level === level) {
    newest.count += 1;
    newest.at = now;
    newest.read = newest.read && read;
  } else {
    entries.unshift({ id: `${now}-${Math.random().toString(36).slice(2, 8)}`, key, text, detail, level, at: now, read, count: 1, trajectory });
  }
  entries = entries.slice(0, MAX_ENTRIES);
  save();
  changed();
  return entries[0].id;
}

/** An entry's words as the truth arrives (an action's outcome that a cluster's reports complete): said anew. */
export function retell(id, text, level) {
  load();
  const entry = entries.find((e) => e.id === id);
  if (!entry) return;
  entry.text = text;
  entry.level = level;
  save();
  changed();
}

/** The person has seen these entries (all, without ids): they are read. */
export function markRead(ids = null) {
  load();
  let any = false;
  for (const e of entries) {
    if (!e.read && (ids === null || ids.includes(e.id))) { e.read = true; any = true; }
  }
  if (any) { save(); changed(); }
}
