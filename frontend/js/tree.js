// A trajectory's jobs as Frame > Job rows, virtualized: only the rows in view are in the DOM (at most a few
// hundred, whatever the size of the trajectory). Group colours come from the server.
//
// Rows are keyed and updated in place (their text, colour and attributes), never redrawn wholesale, and while the
// tree is held (the pointer over it, a menu open ...) its rows keep their places: new jobs wait, announced.
// Keyboard: one row is in the tab order; arrows move, Enter or Space opens a group, the context-menu key (or
// Shift+F10) opens the trajectory's actions.
import { app } from "./context.js";
import { longerThanUsual, overrunOf } from "./eta.js";
import { attemptLabel, colour, groupLabel, groupStatus, listedStatus, word } from "./rules.js";
import { clusterName } from "./trajectories.js";
import { actionOf } from "./keys.js";
import { ago, count as grouped, placeChildren, setAttr, setText, timeOfDay, took } from "./ui.js";
import { newsText } from "./order.js";
import { WholeError } from "./whole.js";

const ROW = 34; // px, every row (a job's cluster, attempt and error sit under its name)
export const ICON = { blue: "▶", amber: "…", green: "✓", red: "✗", grey: "◌", neutral: "•" }; // colour is never the only signal
/** "cluster silent since 20:16": the silence began when the cluster was last heard from (local time). */
export function silentSince(at) {
  return `cluster silent since ${timeOfDay(at)}`;
}
const RETRYABLE = new Set(["failed", "preempted"]); // counted as Failed: Retry Failed Frames takes both

/** A group as a filtered tree lists it (a submission's tasks): counted from the jobs it lists, not from all the
 * frame's jobs the server counts, so that its `2/3` is over the rows under it (and its colour theirs). Each job
 * counts under the status it is listed with, as the server counts (a silent cluster's are `silent`). */
function listedGroup(group, jobs) {
  const counts = Object.fromEntries(Object.keys(group.counts).map((status) => [status, 0]));
  for (const job of jobs) counts[listedStatus(job)] = (counts[listedStatus(job)] || 0) + 1;
  return { ...group, counts, total: jobs.length, status: groupStatus(counts), label: groupLabel(group.key, jobs.length) };
}

function order(key) {
  if (key.startsWith("frame:")) return [0, Number(key.slice(6))];
  return key === "general" ? [1, 0] : [2, 0];
}

export class JobTree {
  /**
   * options: label (the tree's name), filter (only these jobs: a submission's tasks), held() (keep rows in place),
   * onGroupMenu(anchor, x, y) (the trajectory's actions), onJobMenu(job, anchor, x, y) (a task's actions),
   * onRetry(job, anchor) (Retry Failed Frames of its analysis), runLabel(job) (tells same-named jobs apart).
   */
  constructor(container, live, options = {}) {
    this.el = container;
    this.live = live;
    this.o = { label: "Jobs", role: "tree", filter: null, held: () => false, onGroupMenu: null, onJobMenu: null, onRetry: null, runLabel: () => "", ...options };
    this.state = null;
    this.expanded = new Set();
    this.collapsed = new Set();
    this.rows = [];
    this.rowsVersion = -1;
    this.kept = false; // the rows shown are held in place: flatten again once no longer held
    this.waiting = 0;
    this.elements = new Map(); // row key -> its element, for the rows in view
    this.focusKey = null;
    this.el.classList.add("tree");
    this.el.innerHTML = `<div class="tree-bar"><span class="tree-caption quiet small">Frames and jobs</span><button class="news" type="button" hidden></button></div>
      <div class="tree-scroll" role="tree"><div class="spacer"></div><div class="rows"></div></div>`;
    this.news = this.el.querySelector(".news");
    this.scroller = this.el.querySelector(".tree-scroll");
    this.scroller.setAttribute("aria-label", this.o.label);
    this.scroller.setAttribute("role", this.o.role); // a group when it sits under a trajectory's row of a tree
    this.spacer = this.scroller.firstChild;
    this.list = this.scroller.lastChild;
    this.whole = new WholeError(this.scroller);
    this.news.addEventListener("click", () => { this.kept = false; this._flatten(false); this.render(true); });
    this.scroller.addEventListener("scroll", () => this.render(true));
    this.scroller.addEventListener("click", (e) => this._click(e));
    this.scroller.addEventListener("contextmenu", (e) => {
      const row = e.target.closest("[data-key]");
      if (!row) return;
      e.preventDefault();
      this._menu(row, e.clientX, e.clientY);
    });
    this.scroller.addEventListener("keydown", (e) => this._key(e));
    this.scroller.addEventListener("focusin", (e) => { const row = e.target.closest("[data-key]"); if (row) this.focusKey = row.dataset.key; });
  }

  show(state) { this.state = state; this.rowsVersion = -1; this.kept = false; this.scroller.scrollTop = 0; this.render(true); }

  _isOpen(group) {
    if (this.collapsed.has(group.key)) return false;
    return this.expanded.has(group.key) || group.open; // only groups holding storage transfers open by themselves
  }

  _toggle(key, open = null) {
    const group = this.state.groups.get(key);
    if (!group) return;
    const now = open === null ? !this._isOpen(group) : open;
    if (now === this._isOpen(group)) return;
    if (now) { this.expanded.add(key); this.collapsed.delete(key); } else { this.collapsed.add(key); this.expanded.delete(key); }
    this._flatten(false); // the person's own doing: the rows below move, as they expect
    this.render(true);
  }

  _click(e) {
    const row = e.target.closest("[data-key]");
    if (!row) return;
    this.focusKey = row.dataset.key;
    if (e.target.closest(".error") && row.dataset.job) { this._toggleError(row.dataset.key); return; }
    const retry = e.target.closest("[data-retry]");
    if (retry) { const job = this.state.jobs.get(Number(row.dataset.job)); if (job && this.o.onRetry) this.o.onRetry(job, row); return; }
    const button = e.target.closest(".menu-button");
    if (button) { const r = button.getBoundingClientRect(); this._menu(row, r.left, r.bottom); return; }
    if (row.dataset.group) this._toggle(row.dataset.group);
  }

  /** Open (or close) row `key`'s error whole, under the row. */
  _toggleError(key) {
    const i = this.rows.findIndex((r) => r.key === key);
    if (i < 0 || !this.rows[i].job) return;
    this.whole.toggle(key, (i + 1) * ROW, this.rows[i].job.error || "");
    this.render(true);
  }

  _menu(row, x, y) {
    if (row.dataset.group) { if (this.o.onGroupMenu) this.o.onGroupMenu(row, x, y); return; }
    const job = this.state.jobs.get(Number(row.dataset.job)) || (this.rows.find((r) => r.key === row.dataset.key) || {}).job;
    if (job && this.o.onJobMenu) this.o.onJobMenu(job, row, x, y);
  }

  _key(e) {
    const row = e.target.closest("[data-key]");
    if (!row || e.target.closest("button")) return;
    const i = this.rows.findIndex((r) => r.key === row.dataset.key);
    const action = actionOf(e); // keys.js: the one table of shortcuts
    const move = { down: i + 1, up: i - 1, first: 0, last: this.rows.length - 1 }[action];
    if (move !== undefined) { e.preventDefault(); this.focusRow(Math.max(0, Math.min(this.rows.length - 1, move))); return; }
    const r = this.rows[i];
    if (!r) return;
    const open = action === "open" || e.key === " ";
    if (r.group && open) { e.preventDefault(); this._toggle(r.group.key); }
    else if (r.job && r.job.error && open) { e.preventDefault(); this._toggleError(r.key); }
    else if (e.key === "Escape" && this.whole.key) { e.preventDefault(); e.stopPropagation(); this.whole.hide(); this.render(true); }
    else if (r.group && e.key === "ArrowRight") { e.preventDefault(); this._toggle(r.group.key, true); }
    else if (r.group && e.key === "ArrowLeft") { e.preventDefault(); this._toggle(r.group.key, false); }
    else if (r.job && e.key === "ArrowLeft") {
      e.preventDefault();
      let g = i; while (g > 0 && !this.rows[g].group) g--;
      this.focusRow(g);
    } else if (action === "act") {
      e.preventDefault();
      const rect = row.getBoundingClientRect();
      this._menu(row, rect.left + 40, rect.bottom);
    }
  }

  /** Move keyboard focus to row `i`, scrolling it into view. */
  focusRow(i) {
    const r = this.rows[i];
    if (!r) return;
    this.focusKey = r.key;
    const top = i * ROW, height = this.scroller.clientHeight;
    if (top < this.scroller.scrollTop) this.scroller.scrollTop = top;
    else if (top + ROW > this.scroller.scrollTop + height) this.scroller.scrollTop = top + ROW - height;
    this.render(true);
    const el = this.elements.get(r.key);
    if (el) el.focus();
  }

  focusFirst() { if (this.rows.length) this.focusRow(Math.max(0, this.rows.findIndex((r) => r.key === this.focusKey))); }

  _fresh() {
    const s = this.state;
    const rows = [];
    const keys = [...s.groups.keys()].sort((a, b) => { const x = order(a), y = order(b); return x[0] - y[0] || x[1] - y[1]; });
    for (const key of keys) {
      let group = s.groups.get(key);
      let jobs = [...(s.byGroup.get(key) || new Map()).values()];
      if (this.o.filter) { jobs = jobs.filter(this.o.filter); if (!jobs.length) continue; group = listedGroup(group, jobs); }
      const open = this._isOpen(group);
      rows.push({ key: `g:${key}`, group, open });
      if (!open) continue;
      jobs.sort((a, b) => a.name.localeCompare(b.name) || a.id - b.id);
      const names = new Map();
      for (const job of jobs) names.set(job.name, (names.get(job.name) || 0) + 1);
      for (const job of jobs) rows.push({ key: `j:${job.id}`, job, same: names.get(job.name) > 1 });
    }
    return rows;
  }

  /** The rows to show: the latest, or (held) the ones shown, each with its latest data, the new ones waiting. */
  _flatten(held) {
    const fresh = this._fresh();
    this.rowsVersion = this.state.version;
    if (!held || !this.rows.length) { this.rows = fresh; this.kept = false; this.waiting = 0; return; }
    const latest = new Map(fresh.map((r) => [r.key, r]));
    const s = this.state;
    this.rows = this.rows.map((r) => {
      if (latest.has(r.key)) return latest.get(r.key);
      // Filtered, a group missing from the fresh rows lists none of the jobs any more: gone, its last counts kept.
      if (r.group) { const g = this.o.filter ? null : s.groups.get(r.group.key); return g ? { ...r, group: g } : { ...r, gone: true }; }
      const job = s.jobs.get(r.job.id);
      return job ? { ...r, job } : { ...r, gone: true };
    });
    const shown = new Set(this.rows.map((r) => r.key));
    this.waiting = fresh.reduce((n, r) => n + (shown.has(r.key) ? 0 : 1), 0);
    this.kept = true;
  }

  /** Draw the rows in view: after scrolling or toggling (`force`), when the data moved, or to catch up. */
  render(force = false) {
    if (!this.state) return;
    const held = this.o.held();
    if (this.rowsVersion !== this.state.version || (this.kept && !held)) { this._flatten(held); force = true; }
    this.news.hidden = !this.waiting;
    setText(this.news, newsText(this.waiting));
    // Every call patches the rows in view (ages move with the clock); only what changed is touched.
    const now = this.live.now();
    this.spacer.style.height = `${this.rows.length * ROW}px`;
    const height = this.scroller.clientHeight || 480;
    const first = Math.max(0, Math.floor(this.scroller.scrollTop / ROW) - 10);
    const last = Math.min(this.rows.length, first + Math.ceil(height / ROW) + 20);
    this.list.style.transform = `translateY(${first * ROW}px)`;
    const keep = new Map();
    const nodes = [];
    if (!this.rows.length) {
      const empty = this.elements.get("empty") || Object.assign(document.createElement("div"), { className: "empty quiet" });
      setText(empty, this.state.ready ? "No jobs" : "Loading…");
      keep.set("empty", empty);
      nodes.push(empty);
    }
    const focusAt = this.rows.findIndex((r) => r.key === this.focusKey);
    const tabKey = focusAt >= first && focusAt < last ? this.focusKey : this.rows.length ? this.rows[first].key : null;
    for (let i = first; i < last; i++) {
      const r = this.rows[i];
      const kind = r.group ? "group" : "job";
      let el = this.elements.get(r.key);
      if (!el || el.dataset.kind !== kind) el = kind === "group" ? this._groupRow() : this._jobRow();
      if (kind === "group") this._fillGroup(el, r); else this._fillJob(el, r, now);
      el.dataset.key = r.key;
      el.tabIndex = r.key === tabKey ? 0 : -1;
      setAttr(el, "aria-describedby", r.key === this.whole.key ? this.whole.el.id : null);
      keep.set(r.key, el);
      nodes.push(el);
    }
    this.elements = keep;
    placeChildren(this.list, nodes);
    if (this.whole.key) { // the open error follows its row (and closes once the row or its error is gone)
      const at = this.rows.findIndex((r) => r.key === this.whole.key);
      this.whole.place((at + 1) * ROW, at >= 0 && this.rows[at].job ? this.rows[at].job.error : "");
    }
  }

  _groupRow() {
    const el = document.createElement("div");
    el.dataset.kind = "group";
    el.setAttribute("role", "treeitem");
    el.setAttribute("aria-level", "1");
    el.innerHTML = `<span class="twisty" aria-hidden="true"></span><span class="icon" aria-hidden="true"></span>
      <span class="label"></span><span class="ts quiet"><span class="ts-lead">t = </span><span class="ts-value"></span></span><span class="status"></span><span class="count"></span>
      <button class="menu-button" type="button" tabindex="-1" aria-haspopup="menu">⋯</button>`;
    return el;
  }

  _fillGroup(el, r) {
    const g = r.group, c = colour(g.status);
    const label = g.key.startsWith("frame:") ? g.label : groupLabel(g.key, g.total);
    const [twisty, icon, name, ts, status, count, button] = el.children;
    el.className = `row group ${c}${r.gone ? " gone" : ""}`;
    el.dataset.group = g.key;
    setAttr(el, "aria-expanded", String(r.open));
    setText(twisty, r.open ? "▾" : "▸");
    setText(icon, ICON[c]);
    setText(name, label);
    const timed = g.key.startsWith("frame:") && g.timestep !== null;
    setAttr(ts, "hidden", timed ? null : "");
    setText(ts.lastElementChild, timed ? `${g.timestep} ps` : "");
    setText(status, word(g.status));
    setText(count, `${grouped(g.counts.completed)}/${grouped(g.total)}`);
    setAttr(button, "aria-label", `Trajectory actions (${label})`);
  }

  _jobRow() {
    const el = document.createElement("div");
    el.dataset.kind = "job";
    el.setAttribute("role", "treeitem");
    el.setAttribute("aria-level", "2");
    el.innerHTML = `<span class="icon" aria-hidden="true"></span><span class="name-col"><span class="name-line"><span class="label"></span>
      <span class="run quiet"></span></span><span class="meta-line"><span class="where quiet"></span><span class="attempt"></span><span class="error"></span></span></span><span class="status"></span><span class="quiet when"></span>
      <span class="quiet took"></span><button class="retry" type="button" tabindex="-1" data-retry hidden>Retry</button>`;
    return el;
  }

  _fillJob(el, r, now) {
    const j = r.job, shown = listedStatus(j), c = colour(shown);
    const [icon, nameCol, status, when, tookEl, retry] = el.children;
    const [line, meta] = nameCol.children;
    const [where, attempt, error] = meta.children;
    const [label, run] = line.children;
    el.className = `row job ${c}${r.gone ? " gone" : ""}`;
    el.dataset.job = j.id;
    setText(icon, ICON[c]);
    setText(label, j.name);
    setText(run, r.same ? this.o.runLabel(j) : "");
    // A job running longer than usual says so on its second line (room every row keeps), over an earlier error.
    const stuck = longerThanUsual(overrunOf(app.team.summaries.get(j.trajectory_id), j));
    setText(error, stuck || j.error || "");
    error.classList.toggle("stuck", Boolean(stuck));
    setAttr(error, "title", j.error || stuck || null); // cut short on a narrow screen: the whole on hover
    setText(where, clusterName(j.cluster_id));
    setText(attempt, attemptLabel(j.attempts));
    setText(status, shown === "silent" ? silentSince(j.silent_since) : word(shown));
    setText(when, ago(j.updated_at, now));
    setText(tookEl, took(j));
    const retryable = RETRYABLE.has(j.status) && j.kind === "analysis" && j.analysis_id !== null && Boolean(this.o.onRetry);
    retry.hidden = !retryable;
    setAttr(retry, "aria-label", retryable ? `Retry failed frames of ${j.name}` : null);
  }
}
