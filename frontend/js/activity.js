// The Activity page (/#/activity): who did what on the team (actions on jobs and submissions, membership changes,
// key rotations), newest first, for its owners and admins (a member is told it is theirs to read). Filtered by
// action; more rows on request (keyset pages); the same rows as CSV.
import { app } from "./context.js";
import { clock, count, esc } from "./ui.js";

// An action as a person says it.
export const ACTIONS = {
  remove_running: "Removed running jobs", retry_failed: "Retried failed", kill: "Killed", hold: "Held", unhold: "Released",
  retry: "Retried", retry_preempted: "Retried preempted", priority: "Set priority", instance_type: "Set instance type",
  reviewed: "Marked reviewed", retry_sync: "Retried sync", delete_analysis: "Deleted analysis",
  add_member: "Added a member", change_role: "Changed a role", remove_member: "Removed a member", rotate_key: "Rotated a cluster key",
};

export class ActivityPage {
  constructor(main) {
    this.main = main;
    this.action = "";
  }

  render() {
    if (this.main.dataset.page === "activity") return;
    this.main.dataset.page = "activity";
    const options = Object.entries(ACTIONS).map(([k, v]) => `<option value="${k}">${esc(v)}</option>`).join("");
    this.main.innerHTML = `<h1>Activity</h1>
      <p class="activity-tools"><label>Action <select class="activity-action"><option value="">Every action</option>${options}</select></label>
      <a class="activity-csv" download>Download CSV</a></p>
      <div class="table-scroll" tabindex="0" role="region" aria-label="The team's activity (it scrolls sideways on a narrow screen)"><table class="activity"><caption class="visually-hidden">Who did what in the team</caption>
      <thead><tr><th scope="col">When</th><th scope="col">Who</th><th scope="col">What</th><th scope="col" class="num">How many</th>
      <th scope="col">Clusters</th><th scope="col">On</th></tr></thead><tbody></tbody></table></div>
      <p class="activity-note quiet">Loading…</p><button type="button" class="activity-more" hidden>Show more</button>`;
    this.main.querySelector(".activity-action").addEventListener("change", (e) => { this.action = e.target.value; this.load(); });
    this.main.querySelector(".activity-more").addEventListener("click", () => this.load(this.next));
    this.load();
  }

  query(after) {
    const q = new URLSearchParams();
    if (this.action) q.set("action", this.action);
    if (after) q.set("after", after);
    return q.toString();
  }

  async load(after = null) {
    const main = this.main;
    const tbody = main.querySelector("tbody");
    const note = main.querySelector(".activity-note");
    main.querySelector(".activity-csv").href = `/api/teams/${app.teamId}/activity.csv?${this.query(null)}`;
    const response = await fetch(`/api/teams/${app.teamId}/activity?${this.query(after)}`);
    if (main.dataset.page !== "activity") return;
    if (response.status === 403) {
      main.querySelector(".activity-tools").hidden = true;
      main.querySelector(".table-scroll").hidden = true;
      note.textContent = "Only the team's owners and admins see its activity.";
      return;
    }
    const page = await response.json();
    const rows = page.entries.map((e) => `<tr><td>${esc(clock(e.at))}</td><td>${esc(e.actor)}</td>
      <td>${esc(ACTIONS[e.action] || e.action)}</td><td class="num">${count(e.count)}</td>
      <td>${esc(e.clusters.join(", "))}</td><td>${esc(e.scope)}</td></tr>`).join("");
    if (after) tbody.insertAdjacentHTML("beforeend", rows); else tbody.innerHTML = rows;
    this.next = page.next;
    main.querySelector(".activity-more").hidden = !page.next;
    note.textContent = tbody.children.length ? "" : "Nothing recorded yet.";
  }
}
