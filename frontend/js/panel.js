// The panel at the right of the dashboard: one trajectory's jobs (or one submission's tasks), and its analyses.
import { param, setParams } from "./address.js";
import { app } from "./context.js";
import { analysisCounts, timeLeft, whyUnknown } from "./eta.js";
import { Aim, StableOrder, holding } from "./order.js";
import { JobTree } from "./tree.js";
import { follow, followOutcome, jobMenu, loadAnalyses, analysesOf, retryFrames, runLabel, trajectoryMenu, unfollow } from "./trajectories.js";
import { actionOf } from "./keys.js";
import { acting, actedBy, clock, confirmDialog, count, focusBack, menuAt, placeChildren, send, setAttr, setText } from "./ui.js";

export class Panel {
  constructor(el) {
    this.el = el;
    this.id = null;
    this.tree = null;
    this.state = null; // the followed trajectory's jobs (its last removal too)
    this.opener = null;
    this.tab = "jobs";
    this.rows = new Map(); // analysis id -> row
    this.focusAnalysis = null; // the analysis row in the tab order (keys.js moves it)
    this.listed = new StableOrder(); // the listing's order: held, like every list, while the person aims at it
    this.aim = new Aim(el, () => app.schedule());
  }

  get isOpen() { return this.id !== null; }

  held() { return holding([this.aim]); }

  /** Open on a trajectory whose name the page may not know (a link, a reload, an old notification): titled by
   * the server's word for it as soon as it answers, whatever the trajectory's age. */
  openById(id, known, options = {}) {
    this.open(id, known || `Trajectory ${id}`, options);
    if (known) return;
    fetch(`/api/trajectories/${id}`).then((r) => (r.ok ? r.json() : null)).catch(() => null).then((t) => {
      if (t && t.name && this.id === id && !this.el.hidden) this._title(t.name);
    });
  }

  _title(name) {
    this.name = name;
    const el = this.el;
    const title = el.querySelector("#panel-title");
    title.textContent = name;
    title.title = name;
    el.querySelector("#panel-menu").setAttribute("aria-label", `Actions of ${name}`);
    el.querySelector("caption").textContent = `Analyses of ${name}`;
    if (this.tree && this.tree.scroller) this.tree.scroller.setAttribute("aria-label", `Jobs of ${name}`);
  }

  /** Open on a trajectory (`submission`: only that submission's tasks, with the task actions). */
  open(id, name, { submission = null, taskMenu = null, tab = "jobs", opener = document.activeElement } = {}) {
    this.close(false);
    this.id = id;
    this.name = name;
    this.opener = opener;
    this.tab = tab;
    if (submission === null) setParams({ panel: id, tab: tab === "jobs" ? "" : tab });
    const el = this.el;
    el.hidden = false;
    el.innerHTML = `<div class="panel-head"><h2 id="panel-title" tabindex="-1"></h2>
        <button class="menu-button" type="button" aria-haspopup="menu" id="panel-menu">⋯</button>
        <button id="panel-close" type="button" aria-label="Close">×</button></div>
      <div class="tabs" role="tablist" aria-label="Views of the trajectory"${submission === null ? "" : " hidden"}>
        <button type="button" role="tab" id="tab-jobs" aria-controls="panel-jobs">Jobs</button>
        <button type="button" role="tab" id="tab-analyses" aria-controls="panel-analyses">Analyses</button></div>
      <div class="tab-panel" id="panel-jobs" role="tabpanel" aria-labelledby="tab-jobs"><p class="quiet removal-note" role="status" hidden></p><div class="tree-host" data-traj="${id}"></div></div>
      <div class="tab-panel" id="panel-analyses" role="tabpanel" aria-labelledby="tab-analyses">
        <p class="quiet listing-note">Loading…</p>
        <table class="analyses" hidden><caption class="visually-hidden"></caption><thead><tr><th scope="col">Analysis</th>
          <th scope="col">Frames</th><th scope="col">Started</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
          <tbody></tbody></table></div>`;
    this._title(name);
    el.setAttribute("aria-labelledby", "panel-title");
    this.rows = new Map();
    this.listed = new StableOrder();
    this.tree = new JobTree(el.querySelector(".tree-host"), app.live, {
      label: submission === null ? `Jobs of ${name}` : `Tasks of ${name}`,
      filter: submission === null ? null : (job) => job.submission_id === submission,
      held: () => this.held(),
      onGroupMenu: (anchor, x, y) => trajectoryMenu(id, this.name, anchor, x, y),
      onJobMenu: taskMenu || ((job, anchor, x, y) => jobMenu(id, this.name, job, anchor, x, y)),
      onRetry: (job) => retryFrames(job.analysis_id, job.name).then(() => loadAnalyses(id, true)),
      runLabel: runLabel(id),
    });
    this.state = follow(id);
    this.tree.show(this.state);
    loadAnalyses(id, true);
    el.querySelector("#panel-close").addEventListener("click", () => this.close());
    el.querySelector("#panel-menu").addEventListener("click", (e) => {
      const r = e.currentTarget.getBoundingClientRect();
      trajectoryMenu(id, this.name, e.currentTarget, r.left, r.bottom);
    });
    const tabs = [...el.querySelectorAll("[role=tab]")];
    for (const t of tabs) {
      t.addEventListener("click", () => this.show(t.id === "tab-jobs" ? "jobs" : "analyses"));
      t.addEventListener("keydown", (e) => {
        if (e.key !== "ArrowRight" && e.key !== "ArrowLeft") return;
        e.preventDefault();
        const other = tabs[(tabs.indexOf(t) + 1) % tabs.length];
        this.show(other.id === "tab-jobs" ? "jobs" : "analyses");
        other.focus();
      });
    }
    const tbody = el.querySelector(".analyses tbody");
    tbody.addEventListener("click", (e) => this._analysisClick(e));
    tbody.addEventListener("keydown", (e) => this._analysisKey(e));
    tbody.addEventListener("focusin", (e) => { const tr = e.target.closest("[data-analysis]"); if (tr) this.focusAnalysis = tr.dataset.analysis; });
    this.show(tab);
    el.querySelector("#panel-title").focus();
  }

  show(tab) {
    this.tab = tab;
    if (param("panel") === String(this.id)) setParams({ tab: tab === "jobs" ? "" : tab });
    for (const [name, tabId, panelId] of [["jobs", "tab-jobs", "panel-jobs"], ["analyses", "tab-analyses", "panel-analyses"]]) {
      const on = name === tab;
      const t = this.el.querySelector(`#${tabId}`);
      t.setAttribute("aria-selected", String(on));
      t.tabIndex = on ? 0 : -1;
      this.el.querySelector(`#${panelId}`).hidden = !on;
    }
    if (tab === "jobs" && this.tree) this.tree.render(true);
    if (tab === "analyses") { loadAnalyses(this.id); this.drawAnalyses(); }
  }

  close(restore = true) {
    if (this.id === null) return;
    unfollow(this.id);
    setParams({ panel: "", tab: "" });
    this.id = null;
    this.tree = null;
    this.state = null;
    this.el.hidden = true;
    this.el.innerHTML = "";
    if (restore) focusBack(this.opener);
    this.opener = null;
    app.schedule();
  }

  draw() {
    if (this.id === null) return;
    this._removal();
    if (this.tab === "jobs") this.tree.render();
    else { loadAnalyses(this.id); this.drawAnalyses(); }
  }

  /** "Removed by Ada Lovelace at 20:16 (12 jobs)": removed jobs leave the list, the line says who took them. */
  _removal() {
    const note = this.el.querySelector(".removal-note");
    const r = this.state && this.state.removal;
    if (!note) return;
    note.hidden = !r;
    if (!r) return;
    setText(note, `${actedBy("Removed", r.by, r.at, app.live.now())} (${count(r.jobs)} job${r.jobs === 1 ? "" : "s"})`);
  }

  // -- the analysis listing: each analysis's frames, Retry Failed Frames and Delete analysis

  drawAnalyses() {
    const a = analysesOf(this.id);
    const note = this.el.querySelector(".listing-note");
    const table = this.el.querySelector(".analyses");
    if (!note) return;
    const list = a.list || [];
    setText(note, a.error ? a.error : a.list === null ? "Loading…" : list.length ? "" : "No analyses of this trajectory");
    note.hidden = Boolean(a.list && list.length && !a.error);
    table.hidden = !list.length;
    const now = app.live.now();
    const keep = new Map();
    const nodes = [];
    const byId = new Map(list.map((row) => [row.id, row]));
    for (const id of this.listed.next(list.map((row) => row.id), this.held())) {
      const row = byId.get(id);
      if (!row) continue; // deleted: its row leaves at once (the person deleted it, or will see the toast)
      const tr = this.rows.get(row.id) || this._analysisRow(row);
      this._fillAnalysis(tr, row, now);
      keep.set(row.id, tr);
      nodes.push(tr);
    }
    this.rows = keep;
    // One row in the tab order: the one last focused while it is listed, else the first.
    const inOrder = nodes.find((tr) => tr.dataset.analysis === this.focusAnalysis) || nodes[0];
    for (const tr of nodes) tr.tabIndex = tr === inOrder ? 0 : -1;
    placeChildren(table.querySelector("tbody"), nodes);
  }

  /** The list in front while focus is in the panel (keys.js): its analyses, or its jobs. */
  list() {
    const rows = this.tab === "analyses" ? ".analyses [data-analysis]" : "[data-key]";
    return { search: null, rows: () => [...this.el.querySelectorAll(rows)] };
  }

  _analysisRow(row) {
    const tr = document.createElement("tr");
    tr.dataset.analysis = row.id;
    tr.tabIndex = -1;
    tr.innerHTML = `<td class="plugin"></td><td class="frames"><span class="done"></span><span class="failed red"></span><span class="left quiet"></span><span class="eta"></span></td>
      <td class="started"></td><td><div class="actions"><button type="button" data-retry-frames>Retry Failed Frames</button>
      <button type="button" class="delete" data-delete>Delete analysis</button></div></td>`;
    return tr;
  }

  _fillAnalysis(tr, row, now) {
    const [plugin, frames, started, actions] = tr.children;
    const [done, failed, left, eta] = frames.children;
    setText(plugin, row.plugin);
    setText(done, `${count(row.completed)}/${count(row.frames)} frames done`);
    setText(failed, row.failed ? `${row.failed} failed` : "");
    const toGo = row.running + row.queued + (row.silent || 0);
    setText(left, toGo ? `${toGo} to go${row.silent ? ` (${row.silent} cluster silent)` : ""}` : "");
    const seconds = this._analysisEta(row.id);
    setText(eta, toGo ? timeLeft(seconds) : "");
    setAttr(eta, "title", toGo ? whyUnknown(seconds, analysisCounts(row)) : null); // as the cards and popover say it
    setText(started, clock(row.created_at, now));
    const [retry, del] = actions.firstElementChild.children;
    setAttr(retry, "aria-label", `Retry Failed Frames of ${row.plugin}`);
    setAttr(retry, "aria-disabled", row.failed ? null : "true");
    retry.classList.toggle("unavailable", !row.failed);
    setAttr(del, "aria-label", `Delete analysis ${row.plugin} (${clock(row.created_at, now)})`);
  }

  /** An analysis's estimated seconds left, from its trajectory's summary (null: unknown). */
  _analysisEta(analysisId) {
    const s = app.team.summaries.get(this.id);
    const found = s && s.analyses ? s.analyses.find((a) => a.id === analysisId) : null;
    return found ? found.eta : null;
  }

  async _analysisClick(e) {
    const tr = e.target.closest("[data-analysis]");
    if (!tr) return;
    const row = analysesOf(this.id).rows.get(Number(tr.dataset.analysis));
    if (!row) return;
    const button = e.target.closest("button");
    if (e.target.closest("[data-retry-frames]")) await this._retry(row, tr, button);
    else if (e.target.closest("[data-delete]")) await this._delete(row, tr, button);
  }

  /** An analysis row's keys, from keys.js's one table: move between the rows, r retries its failed frames,
   * Delete deletes it (asking first), the action key opens a menu of both. A key pressed on one of its buttons is
   * the button's. */
  _analysisKey(e) {
    const tr = e.target.closest("[data-analysis]");
    if (!tr || e.target !== tr) return;
    const action = actionOf(e);
    const rows = [...tr.parentElement.children];
    const i = rows.indexOf(tr);
    const to = { down: i + 1, up: i - 1, first: 0, last: rows.length - 1 }[action];
    if (to !== undefined) { e.preventDefault(); rows[Math.max(0, Math.min(rows.length - 1, to))].focus(); return; }
    const row = analysesOf(this.id).rows.get(Number(tr.dataset.analysis));
    if (!row) return;
    if (action === "retry") { e.preventDefault(); this._retry(row, tr, tr); }
    else if (action === "delete") { e.preventDefault(); this._delete(row, tr, tr); }
    else if (action === "act") {
      e.preventDefault();
      menuAt(tr, [
        ...(row.failed ? [["Retry Failed Frames", () => this._retry(row, tr, tr)]] : []),
        ["Delete analysis", () => this._delete(row, tr, tr)],
      ], `Actions of ${row.plugin}`);
    }
  }

  async _retry(row, tr, from) {
    if (!row.failed) { tr.querySelector("[data-retry-frames]").focus(); return; } // it says why it is not there
    const id = this.id;
    followOutcome(await acting(`Retry Failed Frames of ${row.plugin}`, () => send(`/api/analyses/${row.id}/retry-failed`), tr));
    loadAnalyses(id, true);
    if (from === tr && tr.isConnected) tr.focus();
  }

  async _delete(row, tr, opener) {
    const id = this.id;
    const active = row.running + row.queued + (row.silent || 0);
    const sure = await confirmDialog({
      title: `Delete analysis ${row.plugin} of ${count(row.frames)} frame${row.frames === 1 ? "" : "s"}?`,
      text: `${active ? `Its ${count(active)} job${active === 1 ? "" : "s"} still queued or running stop on ${clusterNames(row.clusters)}, and its` : "Its"}`
        + ` results (${count(row.completed)} frame${row.completed === 1 ? "" : "s"} done, their jobs and their artifact upload)`
        + " are deleted for the whole team. This cannot be undone.",
      confirm: "Delete analysis",
      opener,
    });
    if (!sure) return;
    await acting(`Delete analysis ${row.plugin}`, () => send(`/api/analyses/${row.id}`, { method: "DELETE" }), tr);
    await loadAnalyses(id, true);
    if (this.id === id && this.tab === "analyses") this.drawAnalyses(); // now, not at the next frame: focus follows it
    if (this.id === id && !opener.isConnected) {
      // Its row is gone: focus stays in the listing (the next row by keys, the next Delete button by pointer).
      const next = opener === tr ? this.el.querySelector(".analyses [data-analysis]") : this.el.querySelector(".analyses [data-delete]");
      (next || this.el.querySelector("#tab-analyses")).focus();
    }
  }
}

/** The clusters an action stops jobs on, named: "gpu-1", "gpu-1 and gpu-2", "gpu-1, gpu-2 and gpu-3". */
function clusterNames(names) {
  if (!names || !names.length) return "their clusters";
  const label = names.length === 1 ? "cluster" : "clusters";
  return `${label} ${names.length === 1 ? names[0] : `${names.slice(0, -1).join(", ")} and ${names[names.length - 1]}`}`;
}
