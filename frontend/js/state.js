// What the browser holds: per channel, the latest of everything (a job's highest version wins).
import { groupKey } from "./rules.js";

export class TeamState {
  constructor() { this.reset(); this.glowing = new Map(); this.rowListeners = new Set(); }

  /** `fn(rows, reload)` hears the Submissions page's rows as they stream (`reload`: read the windows again). */
  onSubmissions(fn) { this.rowListeners.add(fn); return () => this.rowListeners.delete(fn); }

  _rows(rows, reload) { for (const fn of this.rowListeners) fn(rows, reload); }

  /** Summaries read over HTTP (older pages, a search): kept unless the stream already brought a newer one. */
  learn(summaries) {
    for (const s of summaries) {
      const seen = this.summaries.get(s.id);
      if (!seen || (s.updated_at || "") > (seen.updated_at || "")) this.summaries.set(s.id, s);
    }
  }

  reset() {
    this.counts = null;
    this.summaries = new Map();
    this.total = 0;
    this.presence = null;
    this.clusters = null;
  }

  apply(m) {
    switch (m.type) {
      case "reset": this.reset(); this._rows([], true); break;
      case "snapshot":
        this.reset();
        this.counts = m.counts; this.total = m.total_trajectories || 0;
        for (const s of m.trajectories || []) this.summaries.set(s.id, s);
        if (m.presence) this.presence = m.presence;
        if (m.clusters) this.clusters = m.clusters;
        this._rows([], true); // the stream starts again: the Submissions window is read again
        break;
      case "summary":
        this.counts = m.counts; this.total = m.total_trajectories;
        for (const s of m.trajectories) s.total ? this.summaries.set(s.id, s) : this.summaries.delete(s.id);
        // The Submissions page's rows (the page reads its window over HTTP and keeps it live with these).
        if (m.submissions || m.reload_submissions) this._rows(m.submissions || [], Boolean(m.reload_submissions));
        break;
      case "presence": this.presence = m.presence; break;
      case "clusters": this.clusters = m.clusters; break;
      case "glow": this.glowing.set(m.trajectory_id, performance.now() + 3500); break;
    }
  }

  /** The team's jobs running longer than usual, as the trajectories the browser knows count them. */
  stuck() {
    let n = 0;
    for (const s of this.summaries.values()) n += s.stuck || 0;
    return n;
  }

  isGlowing(id) {
    const until = this.glowing.get(id);
    if (until === undefined) return false;
    if (performance.now() < until) return true;
    this.glowing.delete(id);
    return false;
  }

  /** Most recent change first, then the highest id: the server's order, so that its pages continue this list. */
  recent() {
    return [...this.summaries.values()].sort((a, b) => (b.updated_at || "").localeCompare(a.updated_at || "") || b.id - a.id);
  }
}

export class TrajectoryState {
  constructor(id) {
    this.id = id;
    this.jobs = new Map(); // id -> job
    this.byGroup = new Map(); // group key -> Map(id -> job)
    this.groups = new Map(); // key -> group (status from the server)
    this.gone = new Map(); // removed job -> its version, so an older delta cannot bring it back
    this.removal = null; // the last removal a person made while it was followed: { by, at, jobs ... }
    this.ready = false;
    this.version = 0; // bumps on every change: views re-render only when it moved
  }

  apply(m) {
    if (m.type === "reset" || (m.type === "snapshot" && m.page === 0)) {
      this.jobs.clear(); this.byGroup.clear(); this.groups.clear(); this.gone.clear(); this.ready = false;
    }
    for (const job of m.jobs || []) this._job(job);
    for (const g of m.groups || []) g.total ? this.groups.set(g.key, g) : this.groups.delete(g.key);
    if (m.type === "snapshot") this.ready = m.final;
    this.version++;
  }

  /** A job a person removed (Remove Running Jobs): counted in the removal it was part of, one person's within a
   * minute (a job its cluster's report removed first carries the report's time). */
  _removedBy(job) {
    const r = this.removal;
    const at = Date.parse(job.removed_at);
    if (r && r.by === job.removed_by && Math.abs(at - r.time) < 60_000) {
      if (!r.ids.has(job.id)) { r.ids.add(job.id); r.jobs++; }
      return;
    }
    if (r && r.time > at) return; // an older removal's late delta
    this.removal = { by: job.removed_by, at: job.removed_at, time: at, jobs: 1, ids: new Set([job.id]) };
  }

  _job(job) {
    const seen = this.jobs.get(job.id);
    if (seen && seen.version >= job.version) return; // idempotent: an older or repeated delta changes nothing
    if ((this.gone.get(job.id) || 0) >= job.version) return;
    const key = groupKey(job.kind, job.frame);
    let members = this.byGroup.get(key);
    if (job.removed_at) {
      if (job.removed_by) this._removedBy(job);
      this.gone.set(job.id, job.version);
      this.jobs.delete(job.id);
      if (members) { members.delete(job.id); if (!members.size) this.byGroup.delete(key); }
      return;
    }
    this.jobs.set(job.id, job);
    if (!members) this.byGroup.set(key, (members = new Map()));
    members.set(job.id, job);
  }
}
