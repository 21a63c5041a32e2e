// The Submissions page: a window of the team's submissions (sorted, filtered, searched and counted by the server,
// so every one of tens of thousands is reachable), kept live by the team channel's rows. Select with click,
// ctrl/cmd and shift (or the keyboard); right-click, the context-menu key or the Actions button acts on the
// selected rows. The view (sort, filters, search, page) lives in the address, so a reload or a link opens it.
//
// Rows change in place as they stream. A row that enters or leaves the window (under the sort and filters) is
// announced while the pointer or focus is on the table or a menu or dialog is open ("3 new, show"); otherwise the
// window is read again, at most once a second. Nothing moves under the pointer.
import { setParams } from "./address.js";
import { followOutcome, onClusters, silentAsked, silentNote } from "./trajectories.js";
import { app } from "./context.js";
import { timeLeftShort, unfinished, whyUnknown } from "./eta.js";
import { Aim, holding } from "./order.js";
import { showLifecycle } from "./lifecycle.js";
import { arrange, changed, chooseDefault, clampWidth, columnsPanel, defaultColumns, deleteView, listViews, saveView, STEP } from "./columns.js";
import { manageViews } from "./views.js";
import { actionOf } from "./keys.js";
import { menuActions } from "./rules.js";
import { mergeWindow, Streamed } from "./window_rows.js";
import { barImage } from "./bar_image.js";
import { about, acting, actedBy, clock, confirmDialog, count, esc, formDialog, menu, menuAt, moment, placeChildren, send, setAttr, setText, showResult, toast } from "./ui.js";

const COLUMNS = [
  ["id", "JOB ID"], ["user", "USER"], ["status", "STATUS"], ["project", "PROJECT"], ["title", "TITLE"],
  ["priority", "PRIORITY"], ["cores", "CORES"], ["memory_gb", "MEMORY"], ["preemptible", "PREEMPTIBLE"],
  ["progress", "PROGRESS"], ["eta", "TIME LEFT"], ["tasks", "TASKS"], ["avg_frame", "AVG. FRAME"], ["created_at", "CREATED"],
];
const UNSORTED = new Set(["eta"]); // TIME LEFT moves by the second: a heading, not a sort the server keeps
const SEGMENTS = [["completed", "green"], ["running", "blue"], ["queued", "amber"], ["retrying", "amber"],
  ["holding", "amber"], ["silent", "grey"], ["failed", "red"], ["preempted", "red"]];
// The lifecycle diagram draws each status in the same colour (gateway.core.lifecycle.STATUS_COLOURS; the browser
// tests hold the two equal).
export const STATUS_COLOUR = { running: "blue", pending: "amber", holding: "amber", success: "green", downloaded: "green",
  failed: "red", preempted: "red", sync_failed: "red" };
export const STATUSES = ["upload_pending", "uploading", "sync_pending", "syncing", "sync_failed", "pending", "holding",
  "running", "success", "downloaded", "failed", "preempted"];
const PRIORITY = /^-?\d+$/;
let current = null; // the page: the task menu reads what it knows of the submission whose tasks are shown
export const PAGE_SIZE = 100;
const RELOAD_EVERY = 1000; // ms: a window that moved is read again at most this often
const ROWS_A_FRAME = 20; // rows changed in place drawn in one frame (render)
const ROWS_BUILT_A_FRAME = 25; // rows built in one frame: about a screenful (render)
const MOVES_A_FRAME = 12; // rows moved in one frame to a window's new order (render)
const ROWS_REFILLED_A_FRAME = 15; // rows that came drawn in the elements of rows that left, in one frame (render)

/** A column header: its sort button (TIME LEFT: its heading) and its resize handle; STATUS also has a help button,
 * which opens how a submission moves. */
function headerCell(key, label) {
  const handle = `<span class="resize" role="separator" aria-orientation="vertical" tabindex="0" data-resize="${key}"
    aria-label="Width of ${label}: left and right arrows" title="Drag to size ${label}"></span>`;
  const sort = UNSORTED.has(key) ? `<span class="heading">${label}</span>` : `<button type="button" class="sort" data-sort="${key}">${label}</button>`;
  if (key !== "status") return sort + handle;
  return `${handle}<div class="with-help">${sort}<button type="button" class="col-help" data-lifecycle aria-haspopup="dialog"
    aria-label="How a submission moves through its statuses" title="How a submission moves">?</button></div>`;
}

/** A text's words as the server's search sees them: runs of letters and digits, lower case. */
const textWords = (text) => text.toLowerCase().match(/[\p{L}\p{N}]+/gu) || [];

/** Whether `text` holds every word of the search `q`, its last word at least begun: the server's search. */
export function wordsMatch(q, text) {
  const typed = textWords(q), have = textWords(text);
  const last = typed.pop();
  return last !== undefined && typed.every((w) => have.includes(w)) && have.some((h) => h.startsWith(last));
}

/** The view in the address: sort, dir, status, project, user, q, page (1-based); defaults left out. */
export function readView(search = location.search) {
  const p = new URLSearchParams(search);
  const sort = COLUMNS.some(([k]) => k === p.get("sort") && !UNSORTED.has(k)) ? p.get("sort") : "created_at";
  const dir = p.get("dir") === "asc" || p.get("dir") === "desc" ? p.get("dir") : sort === "created_at" ? "desc" : "asc";
  const page = Math.max(1, Math.floor(Number(p.get("page"))) || 1);
  return { sort, dir, status: p.get("status") || "", project: p.get("project") || "", user: p.get("user") || "", q: p.get("q") || "", page };
}

function viewQuery(view, { paged = false } = {}) {
  const p = new URLSearchParams();
  p.set("sort", view.sort);
  p.set("dir", view.dir);
  for (const k of ["status", "project", "user", "q"]) if (view[k]) p.set(k, view[k]);
  if (paged) { p.set("offset", String((view.page - 1) * PAGE_SIZE)); p.set("limit", String(PAGE_SIZE)); }
  return p;
}

/** The view's parameters for the address (defaults left out; the popover's and panel's are kept). */
function addressOf(view) {
  return {
    sort: view.sort !== "created_at" ? view.sort : "",
    dir: view.dir !== (view.sort === "created_at" ? "desc" : "asc") ? view.dir : "",
    status: view.status, project: view.project, user: view.user, q: view.q,
    page: view.page > 1 ? view.page : "",
  };
}

/** The value a column sorts by, as the server sorts it (USER by name, PROGRESS by the completed share). */
function sortValue(r, key) {
  if (key === "user") return app.memberNames.get(r.user_id) || "";
  if (key === "progress") return r.tasks ? r.counts.completed / r.tasks : 0;
  if (key === "preemptible") return r.preemptible ? 1 : 0;
  return r[key];
}

/** Give `el` its `prop` (a property, or an attribute: null removes it) unless row `tr` last gave it that under
 * `slot`: a redraw writes only what changed and reads nothing back from the document. */
function put(tr, slot, el, prop, value) {
  if (slot in tr.was && tr.was[slot] === value) return;
  tr.was[slot] = value;
  if (prop === "textContent") {
    // The cell's one text node keeps its place and changes its words: a node made anew is styled and laid out
    // from nothing (a window read again wrote some 600 of them, traced).
    const text = el.firstChild;
    if (text && text.nodeType === Node.TEXT_NODE && !text.nextSibling) text.data = value;
    else el.textContent = value;
  } else if (prop === "className" || prop === "tabIndex") el[prop] = value;
  else if (value === null || value === undefined) el.removeAttribute(prop);
  else el.setAttribute(prop, String(value));
}

export class SubmissionsPage {
  constructor(main, openTasks) {
    this.main = main;
    this.openTasks = openTasks; // (row, opener) => the panel with its tasks
    this.view = readView();
    this.rows = []; // the window, in the server's order
    this.total = null; // rows matching the filters; null until the first window arrives
    this.exact = true; // false: `total` is the server's estimate (past 100,000 rows), said as one
    this.offset = 0;
    this.known = new Map(); // id -> the latest row seen (the window's and the selected ones)
    this.selected = new Set();
    this.anchor = null;
    this.trs = new Map();
    this.focusId = null;
    this.entering = new Set(); // rows that now belong in the window (announced)
    this.leaving = new Set(); // the window's rows that no longer belong there
    this.moved = false; // a row changed its place in the order
    this.during = null; // rows streamed while a window is being read: newer than it, they win a tie
    this.streamed = new Streamed(); // the latest rows streamed: a window read that found an older copy keeps these
    this.asked = 0; // the number of the latest window read
    this.staleThrough = 0; // the last window read begun before the channel started again (it may miss a change)
    this.gradual = false; // the window was read again by itself: the rows it brought are drawn over frames (render)
    this.turn = 0; // where the next frame's rows changed in place start (render)
    this.drawn = 0; // the window's rows drawn so far (render)
    this.loadedAt = 0;
    this.error = "";
    this.projects = [];
    this.opened = null; // the latest row of the submission whose tasks the panel shows
    this.columns = defaultColumns(COLUMNS); // the columns shown, in order, with the widths a person gave them
    this.views = []; // the saved views the person sees (columns.js)
    this.viewId = null; // the saved view the page shows, until the person changes it
    current = this;
    app.team.onSubmissions((rows, reload) => this.onRows(rows, reload));
  }

  get team() { return app.team; }

  /** Rows from the team channel: in place when in the window, announced when they enter or leave it. */
  onRows(rows, reload) {
    if (reload) { this.moved = true; this.staleThrough = this.asked; app.schedule(); return; }
    const shown = new Map(this.rows.map((r, i) => [r.id, i]));
    for (const r of rows) {
      this.streamed.keep(r);
      if (this.during) this.during.set(r.id, r);
      if (this.opened && this.opened.id === r.id) this.opened = r;
      const at = shown.get(r.id);
      if (at !== undefined) {
        const before = this.rows[at];
        this.rows[at] = r;
        if (!this.belongs(r)) this.leaving.add(r.id);
        else { this.leaving.delete(r.id); if (sortValue(before, this.view.sort) !== sortValue(r, this.view.sort)) this.moved = true; }
      } else if (this.belongs(r)) this.entering.add(r.id);
      else this.entering.delete(r.id);
      if (at !== undefined || this.selected.has(r.id)) this.known.set(r.id, r);
    }
    app.schedule();
  }

  /** Whether a row matches the filters and falls between the window's first and last rows in its order. */
  belongs(r) {
    const v = this.view;
    if (v.status && r.status !== v.status) return false;
    if (v.project && r.project !== v.project) return false;
    if (v.user && String(r.user_id) !== v.user) return false;
    if (v.q && !(String(r.id) === v.q || wordsMatch(v.q, `${r.title} ${r.project} ${app.memberNames.get(r.user_id) || ""}`))) return false;
    if (!this.rows.length) return true;
    const first = this.offset === 0 || this.compare(this.rows[0], r) <= 0;
    const last = this.offset + this.rows.length >= (this.total || 0) || this.compare(r, this.rows[this.rows.length - 1]) <= 0;
    return first && last;
  }

  compare(a, b) {
    const key = this.view.sort, dir = this.view.dir === "desc" ? -1 : 1;
    let x = sortValue(a, key), y = sortValue(b, key);
    if (x === null || x === undefined) x = Infinity; // PostgreSQL: nulls last going up, first going down
    if (y === null || y === undefined) y = Infinity;
    return (x < y ? -1 : x > y ? 1 : a.id - b.id) * dir;
  }

  /** Read the window the view names; of its rows and those streamed (meanwhile or just before), the newer copy
   * shows (window_rows.js). `gradual`: read again by itself as the order moved, its rows that came may be drawn
   * over a few frames; a person's own doing shows at once. */
  async load({ gradual = false } = {}) {
    const asked = ++this.asked;
    this.during = new Map();
    this.loadedAt = performance.now();
    this.main.querySelector("table")?.setAttribute("aria-busy", "true");
    let body = null;
    // A newer view cancels the read still on its way: the server then cancels its statement (a search typed on).
    this.reading?.abort();
    const reading = (this.reading = new AbortController());
    try {
      const response = await fetch(`/api/teams/${app.teamId}/submissions?${viewQuery(this.view, { paged: true })}`, {
        signal: reading.signal,
      });
      body = await response.json().catch(() => ({}));
      if (asked !== this.asked) return;
      if (!response.ok) { this.error = body.message || "The submissions could not be read"; body = null; }
    } catch {
      if (asked !== this.asked) return;
      this.error = "The gateway could not be reached";
    }
    const during = this.during;
    this.during = null;
    this.main.querySelector("table")?.removeAttribute("aria-busy");
    if (!body) { app.schedule(); return; }
    this.error = "";
    const pages = Math.max(1, Math.ceil(body.total / PAGE_SIZE));
    const exact = body.total_exact !== false;
    if (exact && this.view.page > pages) { this.go({ page: pages }); return; } // fewer rows now: the last page there is
    this.rows = mergeWindow(body.rows, { shown: this.known, streamed: this.streamed, during });
    this.gradual = gradual;
    this.total = body.total;
    this.exact = exact;
    this.offset = body.offset;
    for (const r of this.rows) this.known.set(r.id, r);
    for (const id of this.known.keys()) if (!this.selected.has(id) && !this.rows.some((r) => r.id === id)) this.known.delete(id);
    this.entering.clear();
    this.leaving.clear();
    // Cleared here, each of these once kept the window wrong for good:
    // - the channel started again (a snapshot) while this window was read: a change published before then may
    //   have been missed by both, so the window is read again;
    // - a row whose newer copy came meanwhile sorts elsewhere than the read found it: it moved;
    // - a row that came meanwhile, newer than what the read found, enters.
    const found = new Map(body.rows.map((r) => [r.id, r]));
    const key = this.view.sort;
    const resorted = this.rows.some((r) => r !== found.get(r.id) && sortValue(r, key) !== sortValue(found.get(r.id), key));
    this.moved = asked <= this.staleThrough || resorted;
    for (const r of during.values()) if (!found.has(r.id) && this.belongs(r)) this.entering.add(r.id);
    // A row that streamed in while the window was read is newer than the read: it may no longer match the view
    // (a status filter that kept a row whose status moved on), so it leaves like any row that stops matching.
    for (const r of this.rows) if (!this.belongs(r)) this.leaving.add(r.id);
    app.schedule();
  }

  /** Change the view (the person's own doing: the new window shows at once). */
  go(change) {
    this.view = { ...this.view, ...change };
    setParams(addressOf(this.view));
    this.load();
    this.render();
  }

  mount() {
    this.main.dataset.page = "submissions";
    this.main.innerHTML = `<h1>Submissions</h1>
      <div class="toolbar">
        <label class="search"><span class="visually-hidden">Search submissions</span>
          <input type="search" name="q" placeholder="Search job id, title, project, user" autocomplete="off" maxlength="200"></label>
        <div class="filters"></div>
        <button type="button" class="actions-button" aria-haspopup="menu">Actions</button>
        <div class="columns-control"><button type="button" class="columns-button" aria-expanded="false" aria-controls="columns-panel">Columns</button>
          <ul id="columns-panel" class="columns-panel" aria-label="Columns: show, hide and order" hidden></ul></div>
        <label class="views">View <select class="views-select"><option value="">The page's own</option></select></label>
        <button type="button" class="save-view">Save view…</button>
        <button type="button" class="delete-view" hidden>Delete view</button>
        <button type="button" class="manage-views" aria-haspopup="dialog">Manage views…</button>
        <a class="export" download>Export CSV</a>
        <a class="lifecycle-link" href="/submissions/lifecycle.svg" data-lifecycle aria-haspopup="dialog">How a submission moves</a>
        <span class="selection quiet" aria-live="polite"></span>
        <button type="button" class="news" hidden></button></div>
      <p class="load-error red" role="alert" hidden></p>
      <div class="table-scroll">
      <table class="submissions" role="grid" aria-multiselectable="true" aria-label="Submissions"><thead><tr aria-rowindex="1">${COLUMNS.map(([k, label]) =>
        `<th scope="col" data-col="${k}">${headerCell(k, label)}</th>`).join("")}</tr></thead>
      <tbody></tbody></table></div>
      <p class="empty quiet" hidden>No submissions</p>
      <nav class="pager" aria-label="Pages of submissions"><span class="range" aria-live="polite"></span>
        <button type="button" data-go="first">First</button><button type="button" data-go="prev">Previous</button>
        <button type="button" data-go="next">Next</button><button type="button" data-go="last">Last</button></nav>`;
    this.tbody = this.main.querySelector("tbody");
    this.table = this.main.querySelector("table");
    this.trs = new Map();
    this.filterSignature = "";
    this.aim = new Aim(this.table, () => app.schedule());
    this.main.querySelector("input[name=q]").value = this.view.q;
    this.main.querySelector(".news").addEventListener("click", () => this.load());
    this.main.querySelector(".actions-button").addEventListener("click", (e) => this._menu(null, e.currentTarget));
    this._wire();
    this._wireColumns();
    this._arrange();
    this._loadViews(!location.search);
    this.load();
    fetch(`/api/teams/${app.teamId}/projects`).then((r) => r.json()).then((b) => { this.projects = b.projects || []; app.schedule(); }).catch(() => {});
  }

  render() {
    if (this.main.dataset.page !== "submissions" || !this.tbody) this.mount();
    const held = holding([this.aim]);
    if ((this.entering.size || this.leaving.size || this.moved) && !held && !this.during && performance.now() - this.loadedAt > RELOAD_EVERY) this.load({ gradual: true });
    this._drawFilters();
    const nodes = [];
    const keep = new Map();
    const ids = this.rows.map((r) => r.id);
    const focusId = ids.includes(this.focusId) ? this.focusId : ids[0];
    // The element of a submission that left the window draws one that came (a new page, a sort): its cells are
    // rewritten where the words differ, no row is built, and in the same order none moves. A focused one is not.
    const staying = ids.some((id) => !this.trs.has(id)) && new Set(ids);
    const spare = staying ? [...this.trs].filter(([id, tr]) => !staying.has(id) && tr !== document.activeElement).map(([, tr]) => tr) : [];
    const context = `${new Date().toDateString()}|${app.memberNames.size}`; // what every row's words depend on
    const streamed = []; // rows whose element shows them and whose data alone changed: drawn ROWS_A_FRAME a frame
    // Rows with no element to draw them in (a page's first window) are built ROWS_BUILT_A_FRAME a frame, from the
    // top: one frame building all 100 was a long task of the page's load.
    let built = 0, refilled = 0;
    this.drawn = this.rows.length;
    this.rows.every((r, i) => {
      let tr = this.trs.get(r.id);
      if (!tr && this.gradual && refilled >= ROWS_REFILLED_A_FRAME && spare.length) {
        // A window read again while progress streams brings some 50 rows: ROWS_REFILLED_A_FRAME a frame, the top
        // first. Until its turn, the element of a row that left keeps showing that row in this one's place.
        const lingering = spare.shift();
        keep.set(Number(lingering.dataset.sub), lingering);
        nodes.push(lingering);
        app.schedule();
        return true;
      }
      if (!tr && (tr = this._reuse(spare.shift(), r.id))) refilled++;
      if (!tr && built >= ROWS_BUILT_A_FRAME && this.rows.slice(i).every((later) => !this.trs.has(later.id))) {
        this.drawn = i;
        app.schedule();
        return false;
      }
      if (!tr) { tr = this._tr(r.id); built++; }
      const tabbable = r.id === focusId, state = this._state(r, tabbable, context);
      if (tr.filled && tr.filled !== r && tr.filled.id === r.id && tr.filledState === state) streamed.push([tr, r, state, tabbable]);
      else this._fill(tr, r, state, tabbable);
      put(tr, "row", tr, "aria-rowindex", String(this.offset + i + 2)); // the header is row 1
      keep.set(r.id, tr);
      nodes.push(tr);
      return true;
    });
    // Rows that changed in place (1,000 task changes a second reach some 60 of them at once) are drawn a few a
    // frame, taking turns, so no frame lays out and paints them all; a person's doing (a click, a new window) shows
    // at once.
    const from = this.turn % Math.max(1, streamed.length);
    for (const row of [...streamed.slice(from), ...streamed.slice(0, from)].slice(0, ROWS_A_FRAME)) this._fill(...row);
    this.turn = from + ROWS_A_FRAME;
    if (streamed.length > ROWS_A_FRAME) app.schedule();
    this.trs = keep;
    // A window read again while tasks stream moves some 30 rows (each laid out anew): MOVES_A_FRAME a frame, the
    // top first; until the rest are in place they keep theirs (each row shows once).
    if (!placeChildren(this.tbody, nodes, MOVES_A_FRAME)) app.schedule();
    // A page of the rows: the grid says how many there are (-1: an estimate, so unknown).
    setAttr(this.table, "aria-rowcount", this.total === null ? null : String(this.exact ? this.total + 1 : -1));
    const error = this.main.querySelector(".load-error");
    error.hidden = !this.error;
    setText(error, this.error);
    this.main.querySelector(".empty").hidden = nodes.length > 0 || this.total === null;
    setText(this.main.querySelector(".empty"), this.view.q || this.view.status || this.view.project || this.view.user ? "No submissions match" : "No submissions");
    const news = this.main.querySelector(".news");
    const words = [this.entering.size && `${this.entering.size} new`, this.leaving.size && `${this.leaving.size} changed`].filter(Boolean);
    news.hidden = !words.length || !held;
    setText(news, `${words.join(", ")}, show`);
    setText(this.main.querySelector(".selection"), this.selected.size ? `${this.selected.size} selected` : "");
    setAttr(this.main.querySelector(".actions-button"), "aria-disabled", this.selected.size ? null : "true");
    setAttr(this.main.querySelector(".export"), "href", `/api/teams/${app.teamId}/submissions.csv?${viewQuery(this.view)}`);
    for (const th of this.main.querySelectorAll("th[data-col]")) {
      setAttr(th, "aria-sort", this.view.sort === th.dataset.col ? (this.view.dir === "asc" ? "ascending" : "descending") : null);
    }
    this._drawPager();
  }

  _drawPager() {
    const total = this.total || 0;
    const first = total ? this.offset + 1 : 0;
    const last = this.offset + this.drawn; // the rows drawn so far: a first window takes a few frames
    const of = this.exact ? count(total) : about(total);
    setText(this.main.querySelector(".range"), this.total === null ? "Loading…" : total ? `${count(first)}–${count(last)} of ${of}` : "0 of 0");
    const pages = Math.max(1, Math.ceil(total / PAGE_SIZE));
    for (const b of this.main.querySelectorAll("[data-go]")) {
      const back = b.dataset.go === "first" || b.dataset.go === "prev";
      // Past an estimate the last page is not known: Next goes on while pages are full, Last waits for a filter.
      const end = this.exact ? this.view.page >= pages : b.dataset.go === "last" || this.rows.length < PAGE_SIZE;
      b.disabled = back ? this.view.page <= 1 : end;
      setAttr(b, "title", !this.exact && b.dataset.go === "last" ? "The total is an estimate: sort the other way for the last rows" : null);
    }
  }

  _drawFilters() {
    const members = [...app.memberNames.entries()].map(([id, name]) => [String(id), name]);
    const options = (values, current, label) => `<option value="">All ${label}</option>` + values.map(([v, text]) =>
      `<option value="${esc(v)}" ${String(current) === String(v) ? "selected" : ""}>${esc(text)}</option>`).join("");
    const html = `<label>Status <select data-filter="status">${options(STATUSES.map((s) => [s, s]), this.view.status, "statuses")}</select></label>
      <label>User <select data-filter="user">${options(members.sort((a, b) => a[1].localeCompare(b[1])), this.view.user, "users")}</select></label>
      <label>Project <select data-filter="project">${options(this.projects.map((p) => [p, p]), this.view.project, "projects")}</select></label>`;
    if (html === this.filterSignature) return;
    const box = this.main.querySelector(".filters");
    if (box.contains(document.activeElement)) return; // not while a person uses a filter: the options catch up afterwards
    this.filterSignature = html;
    box.innerHTML = html;
  }

  _tr(id) {
    const tr = document.createElement("tr");
    tr.innerHTML = `${COLUMNS.map(([k]) => `<td data-col="${k}"></td>`).join("")}`;
    tr.children[9].innerHTML = `<div class="bar" role="img"></div><span class="quiet small done-words"></span>`;
    tr.cols = [...tr.children]; // in the page's order, whatever order the person shows them in
    arrange(null, [tr], this.columns);
    return this._reuse(tr, id);
  }

  /** `tr` (built, or a row that left the window) as the row of submission `id`; none: null. */
  _reuse(tr, id) {
    if (!tr) return null;
    tr.dataset.sub = id;
    tr.dataset.key = `s:${id}`;
    tr.filled = null;
    tr.was = tr.was || {}; // what each cell was last given (put), so that a redraw reads nothing back
    return tr;
  }

  /** What a row's drawing depends on besides its data: its state on the page and the day. */
  _state(r, tabbable, context) {
    return `${this.selected.has(r.id)}|${this.leaving.has(r.id)}|${tabbable}|${context}`;
  }

  _fill(tr, r, state, tabbable) {
    const c = tr.cols;
    const selected = this.selected.has(r.id);
    // A row is written again only when its data (a new object: a window read again keeps the objects of rows that
    // did not change, window_rows.js), its state on the page or the day changed; then only the cells whose words
    // changed are written.
    if (tr.filled === r && tr.filledState === state) return;
    tr.filled = r;
    tr.filledState = state;
    put(tr, "class", tr, "className", `${selected ? "selected" : ""} ${r.reviewed ? "reviewed" : ""} ${this.leaving.has(r.id) ? "leaving" : ""}`);
    put(tr, "selected", tr, "aria-selected", String(selected));
    put(tr, "tab", tr, "tabIndex", tabbable ? 0 : -1);
    put(tr, 0, c[0], "textContent", String(r.id));
    const user = r.user_id ? app.memberNames.get(r.user_id) || `#${r.user_id}` : "—";
    put(tr, 1, c[1], "textContent", user);
    put(tr, "1t", c[1], "title", r.user_id ? user : "submitted by a cluster, not a person");
    put(tr, 2, c[2], "textContent", r.status);
    put(tr, "2c", c[2], "className", STATUS_COLOUR[r.status] || "");
    put(tr, "2t", c[2], "title", actedNote(r));
    put(tr, 3, c[3], "textContent", r.project);
    put(tr, "3t", c[3], "title", r.project || null);
    put(tr, 4, c[4], "textContent", r.reviewed ? `${r.title} ✓` : r.title);
    put(tr, "4t", c[4], "title", r.reviewed ? `${r.title} (reviewed)` : r.title);
    put(tr, 5, c[5], "textContent", String(r.priority));
    put(tr, 6, c[6], "textContent", String(r.cores));
    put(tr, 7, c[7], "textContent", `${r.memory_gb} GB`);
    put(tr, 8, c[8], "textContent", r.preemptible ? "yes" : "no");
    put(tr, "8t", c[8], "title", r.instance_type);
    const segments = SEGMENTS.filter(([k]) => r.counts[k]);
    const counts = segments.map(([k]) => `${count(r.counts[k])} ${k}`).join(", ");
    const [bar, words] = c[9].children;
    put(tr, "bar", bar, "aria-label", counts || "no tasks");
    put(tr, "9t", c[9], "title", counts || "no tasks");
    // The bar is one element painted with the segments as a gradient: a count moving on (several times a second
    // while tasks stream) paints it again and lays nothing out, where a segment element each was styled and laid
    // out anew (and each segment's tooltip restyled it). Through the CSSOM: the Content-Security-Policy refuses
    // style attributes.
    const image = barImage(segments.map(([k, colour]) => [r.counts[k], colour]));
    if (tr.was.barImage !== image) { tr.was.barImage = image; bar.style.backgroundImage = image; }
    // One line, whatever the counts: the share done, the rest in the bar's tooltip.
    put(tr, "words", words, "textContent", r.tasks ? `${count(r.counts.completed || 0)}/${count(r.tasks)} done` : "");
    const left = unfinished(r.counts) ? timeLeftShort(r.eta) : ""; // only while tasks wait or run
    put(tr, 10, c[10], "textContent", left);
    // "about 1 h 20 min" may be cut short; "unknown" says why.
    put(tr, "10t", c[10], "title", whyUnknown(r.eta, r.counts, "tasks") || left || null);
    put(tr, 11, c[11], "textContent", count(r.tasks));
    put(tr, 12, c[12], "textContent", r.avg_frame === null ? "" : `${r.avg_frame.toFixed(1)} s`);
    put(tr, 13, c[13], "textContent", r.created_at ? clock(r.created_at) : "");
    put(tr, "13t", c[13], "title", r.created_at ? moment(r.created_at) : null);
  }

  /** Wire the page's events once per mount; rows change in place as they stream. */
  _wire() {
    let typing = null;
    this.main.addEventListener("input", (e) => {
      if (e.target.name !== "q") return;
      clearTimeout(typing);
      typing = setTimeout(() => this.go({ q: e.target.value.trim(), page: 1 }), 250);
    });
    this.main.addEventListener("click", (e) => {
      const help = e.target.closest("[data-lifecycle]");
      if (help && !(e.ctrlKey || e.metaKey || e.shiftKey)) { e.preventDefault(); showLifecycle(help); return; } // else: the SVG in a tab
      const th = e.target.closest("[data-sort]");
      if (th) {
        const k = th.dataset.sort;
        const dir = this.view.sort === k ? (this.view.dir === "asc" ? "desc" : "asc") : k === "created_at" ? "desc" : "asc";
        this.go({ sort: k, dir, page: 1 });
        return;
      }
      const pager = e.target.closest("[data-go]");
      if (pager) {
        const pages = Math.max(1, Math.ceil((this.total || 0) / PAGE_SIZE));
        const page = { first: 1, prev: this.view.page - 1, next: this.view.page + 1, last: pages }[pager.dataset.go];
        this.go({ page: Math.max(1, Math.min(pages, page)) });
        return;
      }
      const tr = e.target.closest("[data-sub]");
      if (tr) this._select(Number(tr.dataset.sub), e);
    });
    this.main.addEventListener("dblclick", (e) => {
      const tr = e.target.closest("[data-sub]");
      if (tr) this._openTasks(Number(tr.dataset.sub), tr);
    });
    this.main.addEventListener("keydown", (e) => {
      const tr = e.target.closest("[data-sub]");
      if (!tr || e.target !== tr) return;
      const id = Number(tr.dataset.sub);
      const ids = this.rows.map((r) => r.id);
      const i = ids.indexOf(id);
      if (e.key === "a" && (e.ctrlKey || e.metaKey)) {
        e.preventDefault();
        this.selected = new Set(ids);
        this.render();
        return;
      }
      if (e.key === " " && (e.ctrlKey || e.metaKey)) { e.preventDefault(); this._select(id, { ctrlKey: true }); return; }
      const action = actionOf(e); // keys.js: the one table of shortcuts
      const to = { down: i + 1, up: i - 1, first: 0, last: ids.length - 1 }[action];
      if (to !== undefined) {
        e.preventDefault();
        const next = ids[Math.max(0, Math.min(ids.length - 1, to))];
        if (e.shiftKey) this._select(next, { shiftKey: true });
        this.focusId = next;
        this.render();
        this.trs.get(next)?.focus();
      } else if (action === "open") {
        e.preventDefault();
        this._openTasks(id, tr);
      } else if (action === "select") {
        e.preventDefault(); // select or unselect this row, the others kept (Shift: the range from the last one)
        this._select(id, { ctrlKey: true, shiftKey: e.shiftKey });
      } else if (action === "act") {
        e.preventDefault();
        if (!this.selected.has(id)) this._select(id, {});
        this._menu(null, tr);
      }
    });
    this.main.addEventListener("focusin", (e) => { const tr = e.target.closest("[data-sub]"); if (tr) this.focusId = Number(tr.dataset.sub); });
    this.main.addEventListener("change", (e) => {
      const f = e.target.dataset.filter;
      if (f) this.go({ [f]: e.target.value, page: 1 });
    });
    this.main.addEventListener("contextmenu", (e) => {
      const tr = e.target.closest("[data-sub]");
      if (!tr) return;
      e.preventDefault();
      const id = Number(tr.dataset.sub);
      if (!this.selected.has(id)) this._select(id, {});
      this._menu({ x: e.clientX, y: e.clientY }, tr);
    });
  }

  /** The page's view as a saved view holds it (gateway.core.saved_views.ViewState). */
  _state() {
    const v = this.view;
    return { filters: { status: v.status, project: v.project, user: v.user ? Number(v.user) : null, q: v.q }, sort: v.sort, dir: v.dir,
      columns: this.columns };
  }

  _arrange() {
    arrange(this.main.querySelector("thead tr"), this.trs.values(), this.columns);
    // A focusable separator says where it stands (ARIA requires it): the column's width in px.
    for (const h of this.main.querySelectorAll("thead .resize")) {
      const w = Math.round(h.parentElement.getBoundingClientRect().width);
      h.setAttribute("aria-valuenow", String(w));
      h.setAttribute("aria-valuemin", "40");
      h.setAttribute("aria-valuemax", "800");
    }
    const panel = this.main.querySelector(".columns-panel");
    const focused = panel.contains(document.activeElement) ? document.activeElement : null;
    const again = focused && (focused.dataset.show ? `[data-show="${focused.dataset.show}"]` : `[data-move="${focused.dataset.move}"][data-key="${focused.dataset.key}"]`);
    panel.innerHTML = columnsPanel(COLUMNS, this.columns);
    if (again) (panel.querySelector(`${again}:not(:disabled)`) || panel.querySelector(`[data-show="${focused.dataset.key || focused.dataset.show}"]`))?.focus();
  }

  _setColumns(columns) {
    this.columns = columns;
    this._arrange();
    this._drawViews();
  }

  /** The saved views; `open`: the page opened with no view in its address, so it shows the person's default. */
  async _loadViews(open = false) {
    const views = await listViews(app.teamId);
    if (views === null) return;
    this.views = views;
    const chosen = open && views.find((v) => v.default);
    if (chosen) this._apply(chosen);
    this._drawViews();
  }

  _apply(saved) {
    const f = saved.view.filters;
    this.viewId = saved.id;
    this.columns = saved.view.columns;
    this._arrange();
    this.main.querySelector("input[name=q]").value = f.q;
    this.go({ status: f.status, project: f.project, user: f.user ? String(f.user) : "", q: f.q, sort: saved.view.sort, dir: saved.view.dir, page: 1 });
  }

  _drawViews() {
    const select = this.main.querySelector(".views-select");
    const options = `<option value="">The page's own</option>` + this.views.map((v) =>
      `<option value="${v.id}">${esc(v.name)}${v.shared ? " (shared)" : ""}${v.default ? " ★" : ""}</option>`).join("");
    if (select.dataset.options !== options) { select.innerHTML = options; select.dataset.options = options; }
    select.value = this.viewId === null ? "" : String(this.viewId);
    const view = this.views.find((v) => v.id === this.viewId);
    this.main.querySelector(".delete-view").hidden = !view?.editable;
  }

  _wireColumns() {
    const button = this.main.querySelector(".columns-button"), panel = this.main.querySelector(".columns-panel");
    const open = (yes) => { panel.hidden = !yes; button.setAttribute("aria-expanded", String(yes)); };
    button.addEventListener("click", () => open(panel.hidden));
    panel.addEventListener("keydown", (e) => { if (e.key === "Escape") { open(false); button.focus(); } });
    this.main.addEventListener("focusout", (e) => {
      if (!panel.hidden && !e.relatedTarget?.closest?.(".columns-control") && e.relatedTarget) open(false);
    });
    panel.addEventListener("change", (e) => {
      const key = e.target.dataset.show;
      if (key) this._setColumns(changed(this.columns, COLUMNS, { show: e.target.checked, key }));
    });
    panel.addEventListener("click", (e) => {
      const move = e.target.closest("[data-move]");
      if (move) this._setColumns(changed(this.columns, COLUMNS, { key: move.dataset.key, by: Number(move.dataset.move) }));
    });
    const widen = (key, px) => this._setColumns(this.columns.map((c) => (c.key === key ? { ...c, width: clampWidth(px) } : c)));
    const head = this.main.querySelector("thead");
    head.addEventListener("keydown", (e) => {
      const key = e.target.dataset?.resize;
      const by = { ArrowLeft: -STEP, ArrowRight: STEP }[e.key];
      if (!key || !by) return;
      e.preventDefault();
      widen(key, e.target.parentElement.getBoundingClientRect().width + by);
    });
    head.addEventListener("pointerdown", (e) => {
      const key = e.target.dataset?.resize;
      if (!key) return;
      e.preventDefault();
      const th = e.target.parentElement, start = e.clientX, width = th.getBoundingClientRect().width;
      e.target.setPointerCapture(e.pointerId);
      const moved = (m) => widen(key, width + m.clientX - start);
      e.target.addEventListener("pointermove", moved);
      e.target.addEventListener("pointerup", () => e.target.removeEventListener("pointermove", moved), { once: true });
    });
    this.main.querySelector(".views-select").addEventListener("change", (e) => {
      const saved = this.views.find((v) => String(v.id) === e.target.value);
      if (saved) this._apply(saved);
      else { this.viewId = null; this._setColumns(defaultColumns(COLUMNS)); }
      chooseDefault(app.teamId, saved ? saved.id : null).then(() => this._loadViews());
    });
    this.main.querySelector(".save-view").addEventListener("click", async (e) => {
      const id = await saveView(app.teamId, this._state(), e.currentTarget);
      if (id !== null) { this.viewId = id; await this._loadViews(); }
    });
    this.main.querySelector(".manage-views").addEventListener("click", (e) => manageViews(app.teamId, this.views, () => this._loadViews(), e.currentTarget));
    this.main.querySelector(".delete-view").addEventListener("click", async () => {
      const view = this.views.find((v) => v.id === this.viewId);
      if (view && (await deleteView(app.teamId, view))) { this.viewId = null; await this._loadViews(); }
    });
  }

  _openTasks(id, tr) {
    this.opened = this.known.get(id) || null;
    this.openTasks(this.opened, tr);
  }

  _select(id, e) {
    const ids = this.rows.map((r) => r.id);
    if (e.shiftKey && this.anchor !== null && ids.includes(this.anchor)) {
      const [a, b] = [ids.indexOf(this.anchor), ids.indexOf(id)].sort((x, y) => x - y);
      if (!(e.ctrlKey || e.metaKey)) this.selected.clear();
      for (const sid of ids.slice(a, b + 1)) this.selected.add(sid);
    } else if (e.ctrlKey || e.metaKey) {
      this.selected.has(id) ? this.selected.delete(id) : this.selected.add(id);
      this.anchor = id;
    } else {
      this.selected = new Set([id]);
      this.anchor = id;
    }
    this.focusId = id;
    this.render();
  }

  _menu(at, anchor) {
    const ids = [...this.selected].filter((id) => this.known.has(id));
    if (!ids.length) { toast("Select submissions first (click a row; ctrl or shift for more)", "info"); return; }
    const rows = ids.map((id) => this.known.get(id));
    const items = submissionActions(ids, rows, anchor, this.table);
    if (at) menu(at.x, at.y, items, "Submission actions", anchor);
    else menuAt(anchor, items, "Submission actions");
  }
}

// A cluster that did not confirm may have acted all the same: the toast follows its reports (followOutcome).
const actOn = (what, body, target) =>
  acting(what, () => send("/api/submissions/actions", { body }), target).then(followOutcome);

// Who last acted on a submission or its tasks, as its status cell's tooltip says it (the row's `acted`, sql/022).
const ACTED = { kill: "Killed", hold: "Held", unhold: "Released", retry: "Retried", retry_failed: "Failed tasks retried",
  retry_preempted: "Preempted tasks retried", priority: "Priority set", instance_type: "Instance type changed" };

/** "Killed by Ada Lovelace at 20:16": the member named as the users table names them today (the name at the time
 * for someone no longer in the team); null when no one acted on it. */
export function actedNote(r, now = Date.now()) {
  if (!r.acted || !r.acted_at) return null;
  const name = (r.acted_by && app.memberNames.get(r.acted_by)) || r.acted_by_name || "someone";
  return actedBy(ACTED[r.acted] || r.acted, name, r.acted_at, now);
}

// Actions that cannot be taken back: a person confirms what they will do first, in numbers and per cluster.
const CONFIRMED = { kill: "Kill", retry: "Retry" };

/** Ask first, with what the action would take; then act. Escape or Cancel does nothing. */
async function confirmThenAct(label, action, selection, target, opener) {
  const { ok, body } = await send("/api/submissions/actions/preview", { body: { action, ...selection } }).catch(() => ({ ok: false, body: {} }));
  if (!ok) { showResult(false, body); return; }
  if (body.tasks > 0) {
    const of = selection.submissions ? ` of ${count(body.submissions)} submission${body.submissions === 1 ? "" : "s"}` : "";
    const tasks = `${count(body.tasks)} task${body.tasks === 1 ? "" : "s"}`;
    const sure = await confirmDialog({
      title: `${label} ${tasks}${of} on ${onClusters(body.clusters)}?`,
      text: (action === "kill" ? "Queued, held and running tasks fail with “Killed by a user”. Retry Failed runs them again."
        : "Every task runs again from the start, completed ones included; their results are replaced.") + silentNote(body.clusters),
      confirm: `${label} ${tasks}`,
      opener,
    });
    if (!sure) return;
  }
  await actOn(label, { action, ...selection }, target);
}

const TASK_ITEMS = [["Hold", "hold"], ["Unhold", "unhold"], ["Kill", "kill"], ["Retry", "retry"], ["Retry Failed", "retry_failed"],
  ["Retry Preempted", "retry_preempted"]];

/** The task actions, for selected submissions (`submissions`) or one task (`tasks`); `offered`: those to list. */
function taskItems(selection, target, opener, offered = null) {
  return TASK_ITEMS.filter(([, action]) => !offered || offered.includes(action)).map(([label, action]) => [label, () => (CONFIRMED[action]
    ? confirmThenAct(label, action, selection, target, opener) : askIfSilent(label, action, selection, target, opener))]);
}

/** An action that does not ask first (Hold, Unhold, Retry Failed, Retry Preempted) acts at once, unless a cluster
 * holding its tasks is silent: then the person is asked first, with that cluster named. */
async function askIfSilent(label, action, selection, target, opener) {
  const go = await silentAsked("/api/submissions/actions/preview", { body: { action, ...selection } }, (body) => {
    const of = selection.submissions ? ` of ${count(body.submissions)} submission${body.submissions === 1 ? "" : "s"}` : "";
    const tasks = `${count(body.tasks)} task${body.tasks === 1 ? "" : "s"}`;
    return { title: `${label} ${tasks}${of} on ${onClusters(body.clusters)}?`, text: "", confirm: `${label} ${tasks}` };
  }, opener);
  if (go) await actOn(label, { action, ...selection }, target);
}

/** The menu on selected submissions: only the actions that apply to every one of them (rules.js, menuActions). */
export function submissionActions(ids, rows, opener, target) {
  const reviewed = rows.every((r) => r.reviewed);
  const offered = menuActions(rows.map((r) => ({ staging: r.staging, counts: r.counts || {} })));
  const others = [
    ["retry_sync", ["Retry Sync", () => actOn("Retry Sync", { action: "retry_sync", submissions: ids }, target)]],
    ["reviewed", { label: "Reviewed", checked: reviewed, action: () => actOn("Reviewed", { action: "reviewed", submissions: ids, reviewed: !reviewed }, target) }],
    ["instance_type", ["Edit / Instance Type", () => editInstanceType(ids, rows, opener, target)]],
    ["priority", ["Edit / Priority", () => editPriority(ids, rows, opener, target)]],
  ];
  return [...taskItems({ submissions: ids }, target, opener, offered), ...others.filter(([a]) => offered.includes(a)).map(([, item]) => item)];
}

/** The menu on one task of a submission (the panel opened from the Submissions page). Retry Sync is its
 * submission's (the data is synced once for all its tasks): offered while that sync failed, or when the page does
 * not know (the gateway then says whether there was one). */
export function taskMenu(job, anchor, x, y) {
  const target = anchor.closest(".tree");
  const items = taskItems({ tasks: [job.id] }, target, anchor);
  const row = current?.opened?.id === job.submission_id ? current.opened : current?.known.get(job.submission_id);
  if (!row || row.status === "sync_failed") items.push(["Retry Sync", () => actOn("Retry Sync", { action: "retry_sync", tasks: [job.id] }, target)]);
  menu(x, y, items, `Actions of task ${job.name}`, anchor);
}

async function editInstanceType(ids, rows, opener, target) {
  const query = ids.map((id) => `submission=${id}`).join("&");
  const { ok, body } = await send(`/api/submissions/instance-types?${query}`, { method: "GET" }).catch(() => ({ ok: false, body: {} }));
  if (!ok) { showResult(false, body); return; }
  const where = body.clusters.length === 1 ? `cluster ${body.clusters[0]}` : `clusters ${body.clusters.join(", ")}`;
  if (!body.instance_types.length) { toast(`No instance type is offered by ${where}`, "warning"); return; }
  const current = new Set(rows.map((r) => r.instance_type));
  const options = body.instance_types.map((t) => `<option value="${esc(t.name)}" ${current.size === 1 && current.has(t.name) ? "selected" : ""}>`
    + `${esc(t.name)}: ${t.cores} cores, ${t.memory_gb} GB${t.preemptible ? ", preemptible" : ""}</option>`).join("");
  const answer = await formDialog({
    title: "Edit / Instance Type",
    fields: `<p class="quiet">Run on a different type of render node: only affects tasks that have not yet run; tasks that ran keep
      the type they ran on. Offered by ${esc(where)}.</p>
      <label>Instance type <select name="instance_type">${options}</select></label>`,
    submit: "Change instance type",
    opener,
  });
  if (answer) await actOn("Edit / Instance Type", { action: "instance_type", submissions: ids, instance_type: answer.instance_type }, target);
}

async function editPriority(ids, rows, opener, target) {
  const current = new Set(rows.map((r) => r.priority));
  const answer = await formDialog({
    title: "Edit / Priority",
    fields: `<p class="quiet">A higher number will run before a lower number.</p>
      <label>Priority <input name="priority" type="text" inputmode="numeric" autocomplete="off" value="${current.size === 1 ? [...current][0] : ""}"></label>`,
    submit: "Change priority",
    check: (form) => {
      const value = form.elements.priority.value.trim();
      if (!PRIORITY.test(value) || Math.abs(Number(value)) > 1000) return "Enter a whole number from -1000 to 1000.";
      return null;
    },
    opener,
  });
  if (answer) await actOn("Edit / Priority", { action: "priority", submissions: ids, priority: Number(answer.priority.trim()) }, target);
}
