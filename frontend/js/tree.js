// A trajectory's jobs as Frame > Job rows, virtualized: only the rows in view are in the DOM (at most a few
// hundred, whatever the size of the trajectory). Group colours come from the server.
import { colour, groupLabel } from "./rules.js";
import { ago, esc, took } from "./ui.js";

const ROW = 34; // px, every row (a failed job's error sits under its name)
const ICON = { blue: "▶", amber: "…", green: "✓", red: "✗", neutral: "•" };
const WORD = { running: "running", queued: "queued", retrying: "retrying", completed: "done", failed: "failed", neutral: "partly failed", empty: "" };

function order(key) {
  if (key.startsWith("frame:")) return [0, Number(key.slice(6))];
  return key === "general" ? [1, 0] : [2, 0];
}

export class JobTree {
  constructor(container, live, onRetry, { filter = null, onTaskMenu = null } = {}) {
    this.el = container;
    this.live = live;
    this.onRetry = onRetry;
    this.filter = filter; // only these jobs (a submission's tasks), when set
    this.onTaskMenu = onTaskMenu;
    this.state = null;
    this.expanded = new Set();
    this.collapsed = new Set();
    this.rows = [];
    this.rowsVersion = -1;
    this.el.classList.add("tree");
    this.el.setAttribute("role", "tree");
    this.el.innerHTML = `<div class="spacer"></div><div class="rows"></div>`;
    this.spacer = this.el.firstChild;
    this.list = this.el.lastChild;
    this.el.addEventListener("scroll", () => this.render(true));
    this.el.addEventListener("click", (e) => this._click(e));
    this.el.addEventListener("contextmenu", (e) => {
      const row = e.target.closest("[data-job]");
      if (!row || !this.onTaskMenu) return;
      e.preventDefault();
      this.onTaskMenu(Number(row.dataset.job), e.clientX, e.clientY);
    });
    this.el.addEventListener("keydown", (e) => {
      if ((e.key === "Enter" || e.key === " ") && e.target.dataset.group) { e.preventDefault(); this._toggle(e.target.dataset.group); }
    });
  }

  show(state) { this.state = state; this.rowsVersion = -1; this.el.scrollTop = 0; this.render(true); }

  _isOpen(group, count) {
    if (this.collapsed.has(group.key)) return false;
    return this.expanded.has(group.key) || group.open || count <= 60;
  }

  _toggle(key) {
    const group = this.state.groups.get(key);
    if (!group) return;
    if (this._isOpen(group, this.state.groups.size)) { this.collapsed.add(key); this.expanded.delete(key); }
    else { this.expanded.add(key); this.collapsed.delete(key); }
    this.rowsVersion = -1;
    this.render(true);
  }

  _click(e) {
    const retry = e.target.closest("[data-retry]");
    if (retry) { this.onRetry(Number(retry.dataset.retry)); return; }
    const row = e.target.closest("[data-group]");
    if (row) this._toggle(row.dataset.group);
  }

  _flatten() {
    const s = this.state;
    const rows = [];
    const keys = [...s.groups.keys()].sort((a, b) => { const x = order(a), y = order(b); return x[0] - y[0] || x[1] - y[1]; });
    for (const key of keys) {
      const group = s.groups.get(key);
      let jobs = [...(s.byGroup.get(key) || new Map()).values()];
      if (this.filter) { jobs = jobs.filter(this.filter); if (!jobs.length) continue; }
      const open = this._isOpen(group, keys.length);
      rows.push({ group, open });
      if (!open) continue;
      jobs.sort((a, b) => a.name.localeCompare(b.name) || a.id - b.id);
      for (const job of jobs) rows.push({ job });
    }
    this.rows = rows;
    this.rowsVersion = s.version;
  }

  /** Draw the rows in view; `force` after scrolling or toggling, else only when the data moved. */
  render(force = false) {
    if (!this.state) return;
    if (this.rowsVersion !== this.state.version) { this._flatten(); force = true; }
    if (!force) return;
    const now = this.live.now();
    this.spacer.style.height = `${this.rows.length * ROW}px`;
    const height = this.el.clientHeight || 480;
    const first = Math.max(0, Math.floor(this.el.scrollTop / ROW) - 10);
    const last = Math.min(this.rows.length, first + Math.ceil(height / ROW) + 20);
    this.list.style.transform = `translateY(${first * ROW}px)`;
    const html = [];
    for (let i = first; i < last; i++) html.push(this._row(this.rows[i], now));
    const focused = this.list.contains(document.activeElement) ? document.activeElement.dataset.group : undefined;
    this.list.innerHTML = html.join("") || `<div class="empty quiet">${this.state.ready ? "No jobs" : "Loading…"}</div>`;
    if (focused !== undefined) {
      const again = this.list.querySelector(`[data-group="${CSS.escape(focused)}"]`);
      if (again) again.focus(); // a redraw keeps keyboard focus where it was
    }
  }

  _row(r, now) {
    if (r.group) {
      const g = r.group, c = colour(g.status);
      const label = g.key.startsWith("frame:") && g.timestep !== null ? `${esc(g.label)} <span class="quiet">t = ${g.timestep} ps</span>` : esc(groupLabel(g.key, g.total));
      return `<div class="row group ${c}" role="treeitem" aria-expanded="${r.open}" tabindex="0" data-group="${esc(g.key)}">
        <span class="twisty">${r.open ? "▾" : "▸"}</span><span class="icon" aria-hidden="true">${ICON[c]}</span>
        <span class="label">${label}</span><span class="status">${WORD[g.status] || ""}</span>
        <span class="count">${g.counts.completed}/${g.total}</span></div>`;
    }
    const j = r.job, c = colour(j.status);
    const retry = j.status === "failed" && j.kind === "analysis" && j.analysis_id
      ? `<button class="retry" data-retry="${j.analysis_id}" aria-label="Retry failed frames of ${esc(j.name)}">Retry</button>` : "";
    const error = j.error ? `<span class="error" title="${esc(j.error)}">${esc(j.error)}</span>` : "";
    return `<div class="row job ${c}" role="treeitem" data-job="${j.id}">
      <span class="icon" aria-hidden="true">${ICON[c]}</span><span class="name-col"><span class="label">${esc(j.name)}</span>${error}</span>
      <span class="status">${WORD[j.status]}</span><span class="quiet when" data-at="${esc(j.updated_at)}">${ago(j.updated_at, now)}</span>
      <span class="quiet">${took(j)}</span>${retry}</div>`;
  }
}
