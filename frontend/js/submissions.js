// The Submissions page: every submission as a live row; select with click, ctrl/cmd and shift; right-click acts.
import { esc, menu, toast } from "./ui.js";

const COLUMNS = [
  ["id", "JOB ID"], ["user", "USER"], ["status", "STATUS"], ["project", "PROJECT"], ["title", "TITLE"],
  ["priority", "PRIORITY"], ["cores", "CORES"], ["memory_gb", "MEMORY"], ["preemptible", "PREEMPTIBLE"],
  ["progress", "PROGRESS"], ["tasks", "TASKS"], ["avg_frame", "AVG. FRAME"], ["created_at", "CREATED"],
];
const SEGMENTS = [["completed", "green"], ["running", "blue"], ["queued", "amber"], ["retrying", "amber"],
  ["holding", "amber"], ["failed", "red"], ["preempted", "red"]];
const STATUS_COLOUR = { running: "blue", pending: "amber", holding: "amber", success: "green", downloaded: "green",
  failed: "red", preempted: "red", sync_failed: "red" };

export class SubmissionsPage {
  constructor(main, team, members, openTasks) {
    this.main = main;
    this.team = team; // TeamState: rows arrive on the team channel
    this.members = members; // id -> name
    this.openTasks = openTasks;
    this.sort = ["created_at", -1];
    this.filters = { status: "", user: "", project: "" };
    this.selected = new Set();
    this.anchor = null;
    this.order = [];
    this.signature = "";
  }

  rows() {
    const f = this.filters;
    const list = [...this.team.submissions.values()].filter((r) =>
      (!f.status || r.status === f.status) && (!f.user || String(r.user_id) === f.user) && (!f.project || r.project === f.project));
    const [key, dir] = this.sort;
    const value = (r) => key === "user" ? (this.members.get(r.user_id) || "") : key === "progress" ? r.counts.completed / (r.tasks || 1) : r[key];
    return list.sort((a, b) => { const x = value(a), y = value(b); return (x < y ? -1 : x > y ? 1 : a.id - b.id) * dir; });
  }

  render() {
    const rows = this.rows();
    this.order = rows.map((r) => r.id);
    const html = `<h1>Submissions</h1>${this._filters()}
      <table class="submissions" role="grid" aria-multiselectable="true"><thead><tr>${COLUMNS.map(([k, label]) =>
        `<th scope="col" data-sort="${k}" aria-sort="${this.sort[0] === k ? (this.sort[1] > 0 ? "ascending" : "descending") : "none"}" tabindex="0">${label}</th>`).join("")}</tr></thead>
      <tbody>${rows.map((r) => this._row(r)).join("") || `<tr><td colspan="13" class="quiet">No submissions</td></tr>`}</tbody></table>`;
    if (html === this.signature) return;
    this.signature = html;
    this.main.innerHTML = html;
    // Widths through the CSSOM: the Content-Security-Policy refuses style attributes written as HTML.
    for (const seg of this.main.querySelectorAll(".seg[data-flex]")) seg.style.flex = seg.dataset.flex;
  }

  _filters() {
    const all = [...this.team.submissions.values()];
    const options = (values, current, label) => `<option value="">All ${label}</option>` + [...values].sort().map(([v, text]) =>
      `<option value="${esc(v)}" ${String(current) === String(v) ? "selected" : ""}>${esc(text)}</option>`).join("");
    const statuses = new Map(all.map((r) => [r.status, r.status]));
    const users = new Map(all.filter((r) => r.user_id).map((r) => [String(r.user_id), this.members.get(r.user_id) || `#${r.user_id}`]));
    const projects = new Map(all.filter((r) => r.project).map((r) => [r.project, r.project]));
    return `<div class="filters">
      <label>Status <select data-filter="status">${options(statuses, this.filters.status, "statuses")}</select></label>
      <label>User <select data-filter="user">${options(users, this.filters.user, "users")}</select></label>
      <label>Project <select data-filter="project">${options(projects, this.filters.project, "projects")}</select></label></div>`;
  }

  _row(r) {
    const bar = SEGMENTS.filter(([k]) => r.counts[k]).map(([k, c]) =>
      `<span class="seg ${c}" data-flex="${r.counts[k]}" title="${k}: ${r.counts[k]}"></span>`).join("");
    const counts = SEGMENTS.filter(([k]) => r.counts[k]).map(([k]) => `${r.counts[k]} ${k}`).join(", ");
    const created = r.created_at ? new Date(r.created_at).toLocaleString() : "";
    return `<tr data-sub="${r.id}" aria-selected="${this.selected.has(r.id)}" class="${this.selected.has(r.id) ? "selected" : ""} ${r.reviewed ? "reviewed" : ""}" tabindex="0">
      <td>${r.id}</td><td>${esc(this.members.get(r.user_id) || "")}</td>
      <td class="${STATUS_COLOUR[r.status] || ""}">${esc(r.status)}</td><td>${esc(r.project)}</td><td>${esc(r.title)}${r.reviewed ? " ✓" : ""}</td>
      <td>${r.priority}</td><td>${r.cores}</td><td>${r.memory_gb} GB</td><td>${r.preemptible ? "yes" : "no"}</td>
      <td><div class="bar" role="img" aria-label="${esc(counts)}">${bar}</div><span class="quiet small">${esc(counts)}</span></td>
      <td>${r.tasks}</td><td>${r.avg_frame === null ? "" : `${r.avg_frame.toFixed(1)} s`}</td><td>${esc(created)}</td></tr>`;
  }

  /** Wire the page's events once; the table is redrawn as rows change. */
  wire() {
    this.main.addEventListener("click", (e) => {
      const th = e.target.closest("[data-sort]");
      if (th) { const k = th.dataset.sort; this.sort = [k, this.sort[0] === k ? -this.sort[1] : 1]; this.render(); return; }
      const tr = e.target.closest("[data-sub]");
      if (tr) this._select(Number(tr.dataset.sub), e);
    });
    this.main.addEventListener("dblclick", (e) => {
      const tr = e.target.closest("[data-sub]");
      if (tr) this.openTasks(this.team.submissions.get(Number(tr.dataset.sub)));
    });
    this.main.addEventListener("keydown", (e) => {
      const tr = e.target.closest("[data-sub]");
      if (tr && e.key === "Enter") this.openTasks(this.team.submissions.get(Number(tr.dataset.sub)));
      if (tr && e.key === " ") { e.preventDefault(); this._select(Number(tr.dataset.sub), e); }
      if (tr && e.key === "ContextMenu") { const r = tr.getBoundingClientRect(); this._menu(r.left + 40, r.bottom); }
    });
    this.main.addEventListener("change", (e) => {
      const f = e.target.dataset.filter;
      if (f) { this.filters[f] = e.target.value; this.render(); }
    });
    this.main.addEventListener("contextmenu", (e) => {
      const tr = e.target.closest("[data-sub]");
      if (!tr) return;
      e.preventDefault();
      const id = Number(tr.dataset.sub);
      if (!this.selected.has(id)) this._select(id, {});
      this._menu(e.clientX, e.clientY);
    });
  }

  _select(id, e) {
    if (e.shiftKey && this.anchor !== null) {
      const [a, b] = [this.order.indexOf(this.anchor), this.order.indexOf(id)].sort((x, y) => x - y);
      if (!(e.ctrlKey || e.metaKey)) this.selected.clear();
      for (const sid of this.order.slice(a, b + 1)) this.selected.add(sid);
    } else if (e.ctrlKey || e.metaKey) {
      this.selected.has(id) ? this.selected.delete(id) : this.selected.add(id);
      this.anchor = id;
    } else {
      this.selected = new Set([id]);
      this.anchor = id;
    }
    this.render();
  }

  _menu(x, y) {
    const ids = [...this.selected];
    menu(x, y, submissionActions((body) => act({ ...body, submissions: ids })), "Submission actions");
  }
}

/** The same menu for submissions and for tasks: `send` adds what the action applies to. */
export function submissionActions(send) {
  return [
    ["Hold", () => send({ action: "hold" })],
    ["Unhold", () => send({ action: "unhold" })],
    ["Kill", () => send({ action: "kill" })],
    ["Retry", () => send({ action: "retry" })],
    ["Retry Failed", () => send({ action: "retry_failed" })],
    ["Retry Preempted", () => send({ action: "retry_preempted" })],
    ["Retry Sync", () => send({ action: "retry_sync" })],
    ["Reviewed", () => send({ action: "reviewed" })],
    ["Edit / Instance Type", () => {
      const value = prompt("Instance type (name, cores, memory GB), e.g. gpu-large, 32, 128");
      if (!value) return;
      const [name, cores, memory] = value.split(",").map((s) => s.trim());
      send({ action: "instance_type", instance_type: name, ...(cores ? { cores: Number(cores) } : {}), ...(memory ? { memory_gb: Number(memory) } : {}) });
    }],
    ["Edit / Priority", () => {
      const value = prompt("Priority (a higher number runs first)");
      if (value !== null && value.trim() !== "" && !Number.isNaN(Number(value))) send({ action: "priority", priority: Number(value) });
    }],
  ];
}

export async function act(body) {
  const response = await fetch("/api/submissions/actions", {
    method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body),
  });
  const result = await response.json().catch(() => ({}));
  toast(result.message || "Something went wrong", result.unconfirmed && result.unconfirmed.length ? "warning" : "success");
}
