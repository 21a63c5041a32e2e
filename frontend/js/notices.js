// A finish reaches a person who looked away. The team channel brings every finish of the team (a `notice`); the
// page tells its person about the finishes they chose in Account ("Finishes that reach me", kept on the server as
// `app.me.finishes`, so it follows them to another browser):
//
// - "mine" (the default): the trajectories that are theirs: a submission of theirs ran in the finished wave (the
//   notice's `users`), or they opened its jobs (its panel, or its row in the Jobs popover) or acted on it (a
//   retry) today, remembered per person and day in the browser's storage; and whatever trajectory's panel is open;
// - "team": every finish of the team, folded into the one finish toast that counts them and names their own;
// - "none": no finish toast and no browser notification (so none in the bell's list either): its row, the ring
//   and the glow tell it.
//
// What reaches them is:
// - a toast, kept with every other toast of the last hour in the bell's list (history.js), read or unread;
// - a browser notification with the toast's words while they look elsewhere (another tab or window), if they
//   asked for it: "Notify me when my jobs finish" asks the browser's permission only when switched on. Clicking
//   it brings the page back with the trajectory's panel open.
//
// Under "mine", a teammate's finish that is none of theirs raises nothing: its row, the ring and the glow tell it.
import { app } from "./context.js";
import { history, looking, markRead, onHistory, ownHistory, unreadCount } from "./history.js";
import { longerThanUsual } from "./eta.js";
import { ago, focusBack, placeChildren, setAttr, setText, toast } from "./ui.js";

// -- whose trajectories

const today = () => new Date().toDateString(); // the person's own day
const mineKey = () => `jobs.mine.${app.me.user.id}`;
const MAX_MINE = 500; // trajectories remembered in a day

function mineToday() {
  try {
    const saved = JSON.parse(localStorage.getItem(mineKey()) || "null");
    return saved && saved.day === today() && Array.isArray(saved.ids) ? saved.ids : [];
  } catch {
    return [];
  }
}

/** The person opened this trajectory's jobs or acted on it: its finishes today are theirs. */
export function rememberMine(trajectoryId) {
  if (!app.me) return;
  const ids = mineToday();
  if (ids.includes(trajectoryId)) return;
  ids.push(trajectoryId);
  try { localStorage.setItem(mineKey(), JSON.stringify({ day: today(), ids: ids.slice(-MAX_MINE) })); } catch { /* memory full */ }
}

export function isMine(notice) {
  return (notice.users || []).includes(app.me.user.id) || mineToday().includes(notice.trajectory_id);
}

// -- browser notifications, only when asked for

const NOTIFY_KEY = () => `jobs.notify.${app.me.user.id}`;
const canNotify = () => typeof Notification !== "undefined";
const notifyWanted = () => localStorage.getItem(NOTIFY_KEY()) === "on";

/** Switched on: ask the browser's permission (only now); refused, the switch goes back off. */
async function setNotify(on) {
  if (on && canNotify() && Notification.permission !== "granted") {
    const answer = await Notification.requestPermission().catch(() => "denied");
    if (answer !== "granted") on = false;
  }
  localStorage.setItem(NOTIFY_KEY(), on ? "on" : "off");
  drawBell();
}

// While they look elsewhere, at most one notification a minute: what finished meanwhile is told in one.
const NOTIFY_EVERY = 60000; // ms
let notifiedAt = -Infinity;
let notifyLater = null; // the finishes heard since the last notification, told when the minute is up

function notify(title, body, tag, onclick) {
  if (!canNotify() || !notifyWanted() || Notification.permission !== "granted") return;
  const wait = notifiedAt + NOTIFY_EVERY - Date.now();
  if (wait > 0) {
    if (!notifyLater) notifyLater = { heard: [], timer: setTimeout(notifyHeld, wait) };
    notifyLater.heard.push({ title, body, tag, onclick });
    return;
  }
  show(title, body, tag, onclick);
}

function notifyHeld() {
  const { heard } = notifyLater;
  notifyLater = null;
  if (heard.length === 1) { const [h] = heard; show(h.title, h.body, h.tag, h.onclick); return; }
  const last = heard[heard.length - 1];
  const finishes = heard.every((h) => h.tag.startsWith("finish:"));
  show(finishes ? `${heard.length} trajectories finished` : `${heard.length} updates on your jobs`, heard.map((h) => h.body).join(", "), "finish:summary", last.onclick);
}

function show(title, body, tag, onclick) {
  notifiedAt = Date.now();
  // The tag folds the same finish heard by several tabs of the person into one notification.
  const n = new Notification(title, { body, tag });
  n.onclick = () => { window.focus(); n.close(); onclick(); };
}

// -- a finish

let openTrajectory = () => {};
let panelOpenOn = () => null;
let onOpening = () => {};

// The finishes told since the finish toast appeared: one toast counts them, and names the person's own.
let told = null; // { el, finished, failed, names, open }

/** Which finishes reach the person: "mine", "team" or "none" (Account). */
export const finishesChosen = () => (app.me && app.me.finishes) || "mine";

/** The person chose another answer in Account: it holds from the next finish on. */
export function chooseFinishes(choice) {
  app.me.finishes = choice;
  drawBell();
}

function summary(t) {
  const fine = t.finished - t.failed;
  const parts = [fine && `${fine} successfully`, t.failed && `${t.failed} with errors`].filter(Boolean);
  return `${t.finished} trajectories finished: ${parts.join(", ")}`;
}

/** A `notice` from the team channel: a trajectory's work finished. */
export function finished(m) {
  const choice = finishesChosen();
  if (choice === "none") return;
  const own = isMine(m) || panelOpenOn() === m.trajectory_id;
  if (!own && choice !== "team") return;
  const known = app.team.summaries.get(m.trajectory_id);
  const name = m.name || (known ? known.name : `Trajectory ${m.trajectory_id}`);
  const key = `finish:${m.trajectory_id}:${m.wave}`;
  if (!told || !told.el.isConnected) told = { el: null, finished: 0, failed: 0, names: [], open: null };
  told.finished += 1;
  if (m.level !== "success") told.failed += 1;
  const id = m.trajectory_id;
  const open = () => { markReadOf(m); openTrajectory(id, name); };
  if (own) {
    if (!told.names.includes(name)) told.names.push(name);
    told.open = open; // the summary's name opens the person's own latest
  }
  const text = told.finished === 1 ? m.title : summary(told);
  const level = told.failed ? "warning" : "success";
  // One finish: its name. Several: the person's own among them ("yours: A, B"), or else the latest one's name.
  const detail = told.finished === 1 ? name : told.names.length ? ownNames(told.names) : `latest: ${name}`;
  const opens = told.names.length && told.finished > 1 ? told.open : open;
  told.el = toast(text, level, { detail, open: opens, key, trajectory: id, kind: "finish" });
  if (!looking()) notify(m.title, name, key, open);
}

// -- a job of theirs running longer than usual (the relay names it: gateway/core/eta.py), told once per job

const stuckKey = () => `jobs.stuck.${app.me.user.id}`;
const MAX_STUCK = 500; // jobs remembered as told

function toldStuck() {
  try {
    const ids = JSON.parse(localStorage.getItem(stuckKey()) || "[]");
    return Array.isArray(ids) ? ids : [];
  } catch {
    return [];
  }
}

/** The team channel's summaries: each job of the person's own submissions newly running longer than usual is
 * told once (a toast, kept in the bell's list; a notification while they look elsewhere), never again for it. */
export function stuck(summaries) {
  const me = app.me.user.id;
  let told = null;
  for (const s of summaries || []) {
    for (const o of s.overruns || []) {
      if (o.user !== me) continue;
      told = told || toldStuck();
      if (told.includes(o.id)) continue;
      told.push(o.id);
      const id = s.id, name = s.name;
      const open = () => openTrajectory(id, name);
      const text = `A job of yours is ${longerThanUsual(o.times)}`;
      toast(text, "warning", { detail: name, open, key: `stuck:${o.id}`, trajectory: id, kind: "stuck" });
      if (!looking()) notify(text, name, `stuck:${o.id}`, open);
    }
  }
  if (told) try { localStorage.setItem(stuckKey(), JSON.stringify(told.slice(-MAX_STUCK))); } catch { /* memory full */ }
}

/** "yours: A, B and 3 more": the person's own among the finishes told (or the one their panel shows). */
function ownNames(names) {
  const shown = names.slice(-2).join(", ");
  return names.length > 2 ? `yours: ${shown} and ${names.length - 2} more` : `yours: ${shown}`;
}

function markReadOf(m) {
  const key = `finish:${m.trajectory_id}:${m.wave}`;
  const entry = history().find((e) => e.key === key);
  if (entry) markRead([entry.id]);
}

// -- the bell: the last hour's toasts, under the ring

const BELL_ICON = `<svg viewBox="0 0 24 24" aria-hidden="true"><path d="M12 3a6 6 0 0 0-6 6v3.6L4.3 15.5A1 1 0 0 0 5.2 17h13.6a1 1 0 0 0 .9-1.5L18 12.6V9a6 6 0 0 0-6-6zm0 18a2.5 2.5 0 0 0 2.45-2h-4.9A2.5 2.5 0 0 0 12 21z"/></svg>`;
let bell = null;
let list = null;
let rows = new Map(); // entry id -> its row

/** Put the bell next to the ring and its list in the workspace. `open(id, name)` opens a trajectory's panel;
 * `panelId()` says which one is open; `opening()` is called as the list opens (the popover makes room). */
export function mountNotices({ ring, open, panelId, opening = () => {} }) {
  openTrajectory = open;
  panelOpenOn = panelId;
  onOpening = opening;
  ownHistory(app.me.user.id);
  bell = document.createElement("button");
  bell.id = "bell";
  bell.className = "bell";
  bell.type = "button";
  bell.setAttribute("aria-haspopup", "dialog");
  bell.setAttribute("aria-expanded", "false");
  bell.setAttribute("aria-controls", "history");
  bell.title = "Notifications of the last hour";
  bell.innerHTML = `${BELL_ICON}<span class="badge" hidden></span>`;
  ring.after(bell);
  list = document.createElement("div");
  list.id = "history";
  list.className = "popover history";
  list.setAttribute("role", "dialog");
  list.setAttribute("aria-labelledby", "history-title");
  list.hidden = true;
  list.innerHTML = `<div class="history-bar"><h2 id="history-title">Notifications</h2><span class="quiet small">the last hour</span></div>
    <p class="empty quiet">No notifications in the last hour</p>
    <ul class="history-list" aria-labelledby="history-title"></ul>
    <div class="block notify"><label><input type="checkbox" name="notify"> Notify me when my jobs finish</label>
      <p class="quiet small notify-note"></p></div>`;
  document.querySelector(".workspace").append(list);
  bell.addEventListener("click", () => setOpen(list.hidden));
  list.querySelector("input[name=notify]").addEventListener("change", (e) => setNotify(e.target.checked));
  list.addEventListener("click", (e) => {
    const button = e.target.closest("[data-open]");
    if (!button) return;
    const entry = history().find((x) => x.id === button.dataset.open);
    if (!entry) return;
    setOpen(false, false);
    openTrajectory(entry.trajectory, entry.detail);
  });
  list.addEventListener("keydown", (e) => {
    if (e.key === "Escape") { e.preventDefault(); e.stopPropagation(); setOpen(false); return; }
    const items = [...list.querySelectorAll(".history-list [tabindex]")];
    const i = items.indexOf(document.activeElement);
    const to = { ArrowDown: i + 1, ArrowUp: i - 1, Home: 0, End: items.length - 1 }[e.key];
    if (i >= 0 && to !== undefined && items.length) { e.preventDefault(); items[Math.max(0, Math.min(items.length - 1, to))].focus(); }
  });
  document.addEventListener("click", (e) => {
    if (!list.hidden && !e.composedPath().some((n) => n === list || n === bell)) setOpen(false, false);
  });
  onHistory(() => { drawBell(); app.schedule(); }); // the tab's title counts the unread ones too
  setInterval(() => { if (!list.hidden) drawBell(); }, 15000); // ages move; entries older than an hour leave
  drawBell();
}

export const historyOpen = () => Boolean(list && !list.hidden);

/** Open the list (it shows what is unread, then counts it read: seen), or close it (focus back on the bell). */
export function setOpen(open, restore = true) {
  if (!list || open === !list.hidden) return;
  if (open) onOpening();
  list.hidden = !open;
  bell.setAttribute("aria-expanded", String(open));
  if (open) {
    drawBell();
    const first = list.querySelector(".history-list [tabindex]") || list.querySelector("input[name=notify]");
    first.focus();
    markRead(); // seen: they stay marked new while the list is open
  } else {
    for (const row of rows.values()) row.classList.remove("unread");
    drawBell();
    if (restore) focusBack(bell);
  }
}

function drawBell() {
  if (!bell) return;
  const unread = unreadCount();
  const badge = bell.querySelector(".badge");
  badge.hidden = !unread;
  setText(badge, unread > 99 ? "99+" : String(unread));
  setAttr(bell, "aria-label", unread ? `Notifications, ${unread} unread` : "Notifications");
  if (list.hidden) return;
  const entries = history();
  const now = Date.now();
  const keep = new Map();
  const nodes = [];
  for (const [i, e] of entries.entries()) {
    const li = rows.get(e.id) || row(e);
    if (!e.read) li.classList.add("unread"); // shown as new until the list closes
    fill(li, e, now, i === 0);
    keep.set(e.id, li);
    nodes.push(li);
  }
  rows = keep;
  placeChildren(list.querySelector(".history-list"), nodes);
  list.querySelector(".empty").hidden = entries.length > 0;
  const toggle = list.querySelector("input[name=notify]");
  const note = list.querySelector(".notify-note");
  if (!canNotify()) {
    toggle.checked = false;
    toggle.disabled = true;
    setText(note, "This browser cannot show notifications.");
  } else {
    toggle.checked = notifyWanted() && Notification.permission === "granted";
    toggle.disabled = false;
    setText(note, Notification.permission === "denied"
      ? "Notifications are blocked for this site: allow them in the browser's site settings."
      : NOTIFY_NOTE[finishesChosen()]);
  }
}

const NOTIFY_NOTE = {
  mine: "When a trajectory you started or opened today finishes while you look elsewhere.",
  team: "When a trajectory of your team's finishes while you look elsewhere (Account: finishes that reach you).",
  none: "No finish reaches you: choose which do in Account.",
};

function row(e) {
  const li = document.createElement("li");
  li.className = `entry ${e.level}`;
  li.dataset.entry = e.id;
  li.innerHTML = `<span class="mark" aria-hidden="true"></span><span class="text"><span class="words"></span> <span class="about"></span><span class="times"></span></span>
    <span class="when quiet small"></span><span class="state visually-hidden"></span>`;
  if (e.trajectory) {
    const open = document.createElement("button");
    open.type = "button";
    open.className = "open";
    open.dataset.open = e.id;
    open.textContent = "Open";
    open.setAttribute("aria-label", `Open ${e.detail}`);
    li.append(open);
  }
  return li;
}

function fill(li, e, now, first) {
  const [, text, when, state] = li.children;
  const [words, about, times] = text.children;
  setText(words, e.text);
  setText(about, e.detail);
  setText(times, e.count > 1 ? ` ×${e.count}` : "");
  setText(when, ago(new Date(e.at).toISOString(), now));
  setText(state, li.classList.contains("unread") ? "unread" : "");
  // One stop per entry in the tab order: its Open button, or the entry itself (arrows move between them).
  const stop = li.querySelector(".open") || li;
  stop.tabIndex = first ? 0 : -1;
}
