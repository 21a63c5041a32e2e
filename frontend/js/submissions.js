// The Submissions page: every submission as a live row; select with click, ctrl/cmd and shift (or the keyboard);
// right-click, the context-menu key or the Actions button acts on the selected rows.
//
// Rows are keyed and change in place; while the pointer or keyboard focus is on the table, or a menu or dialog is
// open, they keep their order (new submissions are announced), and the order catches up afterwards.
import { app } from "./context.js";
import { Aim, StableOrder, holding, newsText } from "./order.js";
import { acting, esc, formDialog, isMenuKey, menu, menuAt, placeChildren, send, setAttr, setText, showResult, toast } from "./ui.js";

const COLUMNS = [
  ["id", "JOB ID"], ["user", "USER"], ["status", "STATUS"], ["project", "PROJECT"], ["title", "TITLE"],
  ["priority", "PRIORITY"], ["cores", "CORES"], ["memory_gb", "MEMORY"], ["preemptible", "PREEMPTIBLE"],
  ["progress", "PROGRESS"], ["tasks", "TASKS"], ["avg_frame", "AVG. FRAME"], ["created_at", "CREATED"],
];
const SEGMENTS = [["completed", "green"], ["running", "blue"], ["queued", "amber"], ["retrying", "amber"],
  ["holding", "amber"], ["failed", "red"], ["preempted", "red"]];
const STATUS_COLOUR = { running: "blue", pending: "amber", holding: "amber", success: "green", downloaded: "green",
  failed: "red", preempted: "red", sync_failed: "red" };
const PRIORITY = /^-?\d+$/;

export class SubmissionsPage {
  constructor(main, openTasks) {
    this.main = main;
    this.openTasks = openTasks; // (row, opener) => the panel with its tasks
    this.sort = ["created_at", -1];
    this.filters = { status: "", user: "", project: "" };
    this.selected = new Set();
    this.anchor = null;
    this.shown = []; // ids in the order shown
    this.order = new StableOrder();
    this.trs = new Map();
    this.focusId = null;
    this.filterSignature = "";
  }

  get team() { return app.team; }

  rows() {
    const f = this.filters;
    const list = [...this.team.submissions.values()].filter((r) =>
      (!f.status || r.status === f.status) && (!f.user || String(r.user_id) === f.user) && (!f.project || r.project === f.project));
    const [key, dir] = this.sort;
    const value = (r) => key === "user" ? (app.memberNames.get(r.user_id) || "") : key === "progress" ? r.counts.completed / (r.tasks || 1) : r[key];
    return list.sort((a, b) => { const x = value(a), y = value(b); return (x < y ? -1 : x > y ? 1 : a.id - b.id) * dir; });
  }

  mount() {
    this.main.dataset.page = "submissions";
    this.main.innerHTML = `<h1>Submissions</h1>
      <div class="toolbar"><div class="filters"></div>
        <button type="button" class="actions-button" aria-haspopup="menu">Actions</button>
        <span class="selection quiet" aria-live="polite"></span>
        <button type="button" class="news" hidden></button></div>
      <div class="table-scroll">
      <table class="submissions" role="grid" aria-multiselectable="true" aria-label="Submissions"><thead><tr>${COLUMNS.map(([k, label]) =>
        `<th scope="col" data-col="${k}"><button type="button" class="sort" data-sort="${k}">${label}</button></th>`).join("")}</tr></thead>
      <tbody></tbody></table></div>
      <p class="empty quiet" hidden>No submissions</p>`;
    this.tbody = this.main.querySelector("tbody");
    this.table = this.main.querySelector("table");
    this.trs = new Map();
    this.order = new StableOrder();
    this.filterSignature = "";
    this.aim = new Aim(this.table, () => app.schedule());
    this.main.querySelector(".news").addEventListener("click", () => { this.order.release(); this.render(); });
    this.main.querySelector(".actions-button").addEventListener("click", (e) => this._menu(null, e.currentTarget));
    this._wire();
  }

  render() {
    if (this.main.dataset.page !== "submissions" || !this.tbody) this.mount();
    this._drawFilters();
    const latest = this.rows().map((r) => r.id);
    this.shown = this.order.next(latest, holding([this.aim])).filter((id) => this.team.submissions.has(id));
    const nodes = [];
    const keep = new Map();
    const focusId = this.shown.includes(this.focusId) ? this.focusId : this.shown[0];
    for (const id of this.shown) {
      const tr = this.trs.get(id) || this._tr(id);
      this._fill(tr, this.team.submissions.get(id), id === focusId);
      keep.set(id, tr);
      nodes.push(tr);
    }
    this.trs = keep;
    placeChildren(this.tbody, nodes);
    this.main.querySelector(".empty").hidden = nodes.length > 0;
    const news = this.main.querySelector(".news");
    news.hidden = !this.order.waiting;
    setText(news, newsText(this.order.waiting));
    setText(this.main.querySelector(".selection"), this.selected.size ? `${this.selected.size} selected` : "");
    setAttr(this.main.querySelector(".actions-button"), "aria-disabled", this.selected.size ? null : "true");
    for (const th of this.main.querySelectorAll("th[data-col]")) {
      setAttr(th, "aria-sort", this.sort[0] === th.dataset.col ? (this.sort[1] > 0 ? "ascending" : "descending") : null);
    }
  }

  _drawFilters() {
    const all = [...this.team.submissions.values()];
    const statuses = new Map(all.map((r) => [r.status, r.status]));
    const users = new Map(all.filter((r) => r.user_id).map((r) => [String(r.user_id), app.memberNames.get(r.user_id) || `#${r.user_id}`]));
    const projects = new Map(all.filter((r) => r.project).map((r) => [r.project, r.project]));
    const options = (values, current, label) => `<option value="">All ${label}</option>` + [...values].sort().map(([v, text]) =>
      `<option value="${esc(v)}" ${String(current) === String(v) ? "selected" : ""}>${esc(text)}</option>`).join("");
    const html = `<label>Status <select data-filter="status">${options(statuses, this.filters.status, "statuses")}</select></label>
      <label>User <select data-filter="user">${options(users, this.filters.user, "users")}</select></label>
      <label>Project <select data-filter="project">${options(projects, this.filters.project, "projects")}</select></label>`;
    if (html === this.filterSignature) return;
    const box = this.main.querySelector(".filters");
    const focused = box.contains(document.activeElement) ? document.activeElement.dataset.filter : null;
    if (focused) return; // not while a person uses a filter: the options catch up afterwards
    this.filterSignature = html;
    box.innerHTML = html;
  }

  _tr(id) {
    const tr = document.createElement("tr");
    tr.dataset.sub = id;
    tr.dataset.key = `s:${id}`;
    tr.innerHTML = `${COLUMNS.map(([k]) => `<td data-col="${k}"></td>`).join("")}`;
    tr.children[9].innerHTML = `<div class="bar" role="img"></div><span class="quiet small counts"></span>`;
    return tr;
  }

  _fill(tr, r, tabbable) {
    const c = tr.children;
    const selected = this.selected.has(r.id);
    tr.className = `${selected ? "selected" : ""} ${r.reviewed ? "reviewed" : ""}`;
    setAttr(tr, "aria-selected", String(selected));
    tr.tabIndex = tabbable ? 0 : -1;
    setText(c[0], String(r.id));
    const user = r.user_id ? app.memberNames.get(r.user_id) || `#${r.user_id}` : "—";
    setText(c[1], user);
    setAttr(c[1], "title", r.user_id ? null : "submitted by a cluster, not a person");
    setText(c[2], r.status);
    c[2].className = STATUS_COLOUR[r.status] || "";
    setText(c[3], r.project);
    setText(c[4], r.reviewed ? `${r.title} ✓` : r.title);
    setAttr(c[4], "title", r.reviewed ? `${r.title} (reviewed)` : r.title);
    setText(c[5], String(r.priority));
    setText(c[6], String(r.cores));
    setText(c[7], `${r.memory_gb} GB`);
    setText(c[8], r.preemptible ? "yes" : "no");
    setAttr(c[8], "title", r.instance_type);
    const counts = SEGMENTS.filter(([k]) => r.counts[k]).map(([k]) => `${r.counts[k]} ${k}`).join(", ");
    const [bar, words] = c[9].children;
    setAttr(bar, "aria-label", counts || "no tasks");
    const segments = SEGMENTS.filter(([k]) => r.counts[k]);
    const signature = segments.map(([k]) => `${k}:${r.counts[k]}`).join(",");
    if (bar.dataset.signature !== signature) {
      bar.dataset.signature = signature;
      bar.replaceChildren(...segments.map(([k, colour]) => {
        const seg = document.createElement("span");
        seg.className = `seg ${colour}`;
        seg.dataset.flex = String(r.counts[k]);
        seg.style.flex = String(r.counts[k]); // through the CSSOM: the Content-Security-Policy refuses style attributes
        seg.title = `${k}: ${r.counts[k]}`;
        return seg;
      }));
    }
    setText(words, counts);
    setText(c[10], String(r.tasks));
    setText(c[11], r.avg_frame === null ? "" : `${r.avg_frame.toFixed(1)} s`);
    setText(c[12], r.created_at ? new Date(r.created_at).toLocaleString() : "");
  }

  /** Wire the page's events once per mount; rows change in place as they stream. */
  _wire() {
    this.main.addEventListener("click", (e) => {
      const th = e.target.closest("[data-sort]");
      if (th) {
        const k = th.dataset.sort;
        this.sort = [k, this.sort[0] === k ? -this.sort[1] : 1];
        this.order.release(); // the person's own doing: the new order shows at once
        this.render();
        return;
      }
      const tr = e.target.closest("[data-sub]");
      if (tr) this._select(Number(tr.dataset.sub), e);
    });
    this.main.addEventListener("dblclick", (e) => {
      const tr = e.target.closest("[data-sub]");
      if (tr) this.openTasks(this.team.submissions.get(Number(tr.dataset.sub)), tr);
    });
    this.main.addEventListener("keydown", (e) => {
      const tr = e.target.closest("[data-sub]");
      if (!tr || e.target !== tr) return;
      const id = Number(tr.dataset.sub);
      const i = this.shown.indexOf(id);
      const to = { ArrowDown: i + 1, ArrowUp: i - 1, Home: 0, End: this.shown.length - 1 }[e.key];
      if (to !== undefined) {
        e.preventDefault();
        const next = this.shown[Math.max(0, Math.min(this.shown.length - 1, to))];
        if (e.shiftKey) this._select(next, { shiftKey: true });
        this.focusId = next;
        this.render();
        this.trs.get(next)?.focus();
      } else if (e.key === "Enter") {
        e.preventDefault();
        this.openTasks(this.team.submissions.get(id), tr);
      } else if (e.key === " ") {
        e.preventDefault();
        this._select(id, { ctrlKey: e.ctrlKey || e.metaKey, shiftKey: e.shiftKey });
      } else if (e.key === "a" && (e.ctrlKey || e.metaKey)) {
        e.preventDefault();
        this.selected = new Set(this.shown);
        this.render();
      } else if (isMenuKey(e)) {
        e.preventDefault();
        if (!this.selected.has(id)) this._select(id, {});
        this._menu(null, tr);
      }
    });
    this.main.addEventListener("focusin", (e) => { const tr = e.target.closest("[data-sub]"); if (tr) this.focusId = Number(tr.dataset.sub); });
    this.main.addEventListener("change", (e) => {
      const f = e.target.dataset.filter;
      if (f) { this.filters[f] = e.target.value; this.order.release(); this.render(); }
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

  _select(id, e) {
    if (e.shiftKey && this.anchor !== null) {
      const [a, b] = [this.shown.indexOf(this.anchor), this.shown.indexOf(id)].sort((x, y) => x - y);
      if (!(e.ctrlKey || e.metaKey)) this.selected.clear();
      for (const sid of this.shown.slice(a, b + 1)) this.selected.add(sid);
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
    const ids = [...this.selected].filter((id) => this.team.submissions.has(id));
    if (!ids.length) { toast("Select submissions first (click a row; ctrl or shift for more)", "info"); return; }
    const rows = ids.map((id) => this.team.submissions.get(id));
    const items = submissionActions(ids, rows, anchor, this.table);
    if (at) menu(at.x, at.y, items, "Submission actions", anchor);
    else menuAt(anchor, items, "Submission actions");
  }
}

const actOn = (what, body, target) =>
  acting(what, () => send("/api/submissions/actions", { body }), target);

/** The task actions, for selected submissions (`submissions`) or one task (`tasks`). */
function taskItems(selection, target) {
  return [
    ["Hold", "hold"], ["Unhold", "unhold"], ["Kill", "kill"], ["Retry", "retry"], ["Retry Failed", "retry_failed"],
    ["Retry Preempted", "retry_preempted"],
  ].map(([label, action]) => [label, () => actOn(label, { action, ...selection }, target)]);
}

/** The menu on selected submissions. */
export function submissionActions(ids, rows, opener, target) {
  const reviewed = rows.every((r) => r.reviewed);
  return [
    ...taskItems({ submissions: ids }, target),
    ["Retry Sync", () => actOn("Retry Sync", { action: "retry_sync", submissions: ids }, target)],
    { label: "Reviewed", checked: reviewed, action: () => actOn("Reviewed", { action: "reviewed", submissions: ids, reviewed: !reviewed }, target) },
    ["Edit / Instance Type", () => editInstanceType(ids, rows, opener, target)],
    ["Edit / Priority", () => editPriority(ids, rows, opener, target)],
  ];
}

/** The menu on one task of a submission (the panel opened from the Submissions page). */
export function taskMenu(job, anchor, x, y) {
  menu(x, y, taskItems({ tasks: [job.id] }, anchor.closest(".tree")), `Actions of task ${job.name}`, anchor);
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
    fields: `<p class="quiet">Run on a different type of render node: only affects tasks that have not yet run. Offered by ${esc(where)}.</p>
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
