// A trajectory's live jobs (one subscription each, shared by the popover and the panel), its actions, and its
// analyses (the listing, and the start times that tell same-named jobs of two pipeline runs apart).
import { app } from "./context.js";
import { rememberMine } from "./notices.js";
import { TrajectoryState } from "./state.js";
import { acting, clock, confirmDialog, count, menu, retext, send, showResult } from "./ui.js";

const followed = new Map(); // id -> { state, users }

export function follow(id) {
  rememberMine(id); // its jobs opened (a panel, a row of the popover): its finishes today are the person's
  let t = followed.get(id);
  if (!t) {
    t = { state: new TrajectoryState(id), users: 0 };
    followed.set(id, t);
    app.live.subscribe(`trajectory:${id}`, (m) => {
      if (m.type === "notice") return; // the team channel brings every finish, this one too (notices.js)
      t.state.apply(m);
      learnAnalyses(id, m.jobs || []);
      app.schedule();
    });
  }
  t.users++;
  return t.state;
}

export function unfollow(id) {
  const t = followed.get(id);
  if (t && --t.users === 0) { followed.delete(id); app.live.unsubscribe(`trajectory:${id}`); }
}

/** Remove Running Jobs and Retry Failed Jobs: what a trajectory's group offers (right-click, the context-menu
 * key, its menu button), in the popover and in the panel. */
export function trajectoryMenu(id, name, anchor, x, y) {
  menu(x, y, [
    ["Remove Running Jobs", () => removeRunning(id, name, anchor)],
    ["Retry Failed Jobs", () => retryFailed(id, name, anchor)],
  ], `Actions of ${name}`, anchor);
}

/** A job's menu in the Jobs view: Retry Failed Frames for a failed analysis job, then its trajectory's actions. */
export function jobMenu(trajectoryId, name, job, anchor, x, y) {
  const items = [];
  if ((job.status === "failed" || job.status === "preempted") && job.kind === "analysis" && job.analysis_id !== null) {
    items.push([`Retry Failed Frames of ${job.name}`, () => retryFrames(job.analysis_id, job.name)]);
  }
  items.push(
    ["Remove Running Jobs", () => removeRunning(trajectoryId, name, anchor)],
    ["Retry Failed Jobs", () => retryFailed(trajectoryId, name, anchor)],
  );
  menu(x, y, items, `Actions of ${name}`, anchor);
}

/** Remove Running Jobs asks first, with how many jobs it stops on which clusters (it cannot be undone). */
async function removeRunning(id, name, opener) {
  const { ok, body } = await send(`/api/trajectories/${id}/remove-running/preview`, { method: "GET" }).catch(() => ({ ok: false, body: {} }));
  if (!ok) { showResult(false, body); return; }
  if (body.tasks > 0) {
    const jobs = `${count(body.tasks)} job${body.tasks === 1 ? "" : "s"}`;
    const sure = await confirmDialog({
      title: `Remove ${jobs} of ${name} on ${onClusters(body.clusters)}?`,
      text: "Their clusters stop the queued, running and retrying jobs, and they leave the list. What they already produced is kept."
        + silentNote(body.clusters),
      confirm: `Remove ${jobs}`,
      opener,
    });
    if (!sure) return;
  }
  followOutcome(await acting("Remove Running Jobs", () => send(`/api/trajectories/${id}/remove-running`)));
}

/** "on cpu-big (40) and gpu-2 (30)": the clusters a confirmation names, each with its share when there are several. */
export function onClusters(clusters) {
  const names = clusters.map((c) => (clusters.length > 1 ? `${c.name} (${count(c.tasks)})` : c.name));
  return names.length > 1 ? `${names.slice(0, -1).join(", ")} and ${names[names.length - 1]}` : names[0] || "";
}

/** What a confirmation says of the silent clusters among those it acts on (empty when none is): named before the
 * person confirms, since such a cluster acts only once it reports again. */
export function silentNote(clusters) {
  const quiet = clusters.filter((c) => c.silent_seconds !== null && c.silent_seconds !== undefined);
  if (!quiet.length) return "";
  const each = quiet.map((c) => `${c.name} has been silent for ${silentFor(c.silent_seconds)}`);
  return ` ${each.join("; ")}: ${quiet.length === 1 ? "it acts" : "they act"} on this only once ${quiet.length === 1 ? "it reports" : "they report"} again.`;
}

const FOLLOWED_FOR = 60000; // how long an outcome follows the reports of a cluster that did not confirm, in ms
const FOLLOWED_CHANNELS = 20; // trajectories an outcome follows at most

/** An action's outcome that a cluster did not confirm in time (`body.pending`, docs/jobs-view.md): it may have
 * acted all the same, and its reports say so. The jobs it was asked about are followed live on their
 * trajectories' channels (Retry Sync's submissions on the team channel's rows) and the same toast says, in place,
 * how many are done ("Removed 80 job(s); gpu-2 confirmed by its reports after 4 s"); after FOLLOWED_FOR it says how
 * many are still unaccounted for, and where. What is too much to follow (past the 10,000 jobs an answer names, or
 * the jobs of trajectories past the FOLLOWED_CHANNELS with the most of them) is counted, never left out: "Killed 20
 * of 22 task(s); 2 more on gpu-2 not followed here". */
export function followOutcome(result) {
  const { ok, body, shown, started } = result || {};
  if (!ok || !shown || !body || !body.becomes || !(body.pending || []).length) return result;
  const watch = body.becomes === "syncing" ? watchSubmissions(body.pending) : watchJobs(body);
  if (!watch.asked.length) { watch.stop(); return result; } // nothing named to follow: the answer's words stand
  const silent = new Map(body.pending.filter((p) => p.silent_seconds !== null && p.silent_seconds !== undefined).map((p) => [p.cluster, p.silent_seconds]));
  const byCluster = (pairs) => pairs.sort(([a], [b]) => a.localeCompare(b));
  let timer = 0;
  const stop = () => { clearInterval(timer); watch.stop(); };
  const tick = () => {
    const seconds = Math.max(1, Math.round((performance.now() - started) / 1000));
    const over = performance.now() - started >= FOLLOWED_FOR;
    const left = new Map();
    for (const a of watch.asked) if (!watch.done(a)) left.set(a.cluster, (left.get(a.cluster) || 0) + 1);
    const n = body.acted + watch.asked.length - [...left.values()].reduce((x, y) => x + y, 0);
    const all = n === body.found;
    const words = body.done.replace("{n}", all ? count(n) : `${count(n)} of ${count(body.found)}`) + (all && body.note ? body.note : "");
    const others = byCluster([...watch.unfollowed].filter(([, k]) => k > 0));
    const rest = others.length ? `; ${others.map(([c, k]) => `${count(k)} more on ${c}`).join(", ")} not followed here` : "";
    let text = null;
    let level = "warning";
    if (!left.size && !others.length) {
      const names = andList(body.pending.map((p) => p.cluster));
      text = `${words}; ${names} confirmed by ${body.pending.length === 1 ? "its" : "their"} reports after ${seconds} s`;
      if (n === body.found) level = "success";
    } else if (!left.size) {
      text = `${words}${rest}`; // all that is followed is done: what is not is said, and the toast rests
    } else if (n > 0 || over) {
      const head = n > 0 ? words : body.doing.replace("{n}", count(body.found));
      const parts = byCluster([...left]).map(([c, k]) => `${count(k)} on ${c}`).join("; ");
      const quiet = [...left.keys()].filter((c) => silent.has(c)).sort()
        .map((c) => `; cluster ${c} is silent (nothing heard for ${silentSince(silent.get(c))})`).join("");
      text = `${head}; ${parts} ${over ? `still unaccounted for after ${seconds} s` : "not confirmed yet"}${rest}${quiet}`;
    }
    // Nothing known yet: the answer's own words stand ("Removing 80 job(s) on gpu-2: not confirmed yet").
    const there = text === null ? shown.isConnected : retext(shown, text, level);
    if (!there || !left.size || over) stop();
  };
  timer = setInterval(tick, 500);
  tick();
  return result;
}

/** The jobs an outcome follows: those named on the FOLLOWED_CHANNELS trajectories holding the most of them, each
 * done once it shows `becomes`; the rest counted per cluster (`unfollowed`). */
function watchJobs(body) {
  const named = body.pending.flatMap((p) => (p.jobs || []).map(([id, trajectory, attempts]) => ({ id, trajectory, attempts, cluster: p.cluster })));
  const many = new Map();
  for (const a of named) many.set(a.trajectory, (many.get(a.trajectory) || 0) + 1);
  const chosen = new Set([...many].sort(([a, x], [b, y]) => y - x || a - b).slice(0, FOLLOWED_CHANNELS).map(([t]) => t));
  const asked = named.filter((a) => chosen.has(a.trajectory));
  const unfollowed = new Map(body.pending.map((p) => [p.cluster, p.count]));
  for (const a of asked) unfollowed.set(a.cluster, unfollowed.get(a.cluster) - 1);
  const states = new Map([...chosen].map((t) => [t, follow(t)]));
  const done = (a) => {
    const state = states.get(a.trajectory);
    const job = state.jobs.get(a.id);
    switch (body.becomes) {
      case "removed": return state.gone.has(a.id) || (state.ready && !job);
      case "holding": return Boolean(job) && job.status === "holding";
      case "released": return Boolean(job) && job.status !== "holding";
      case "failed": return Boolean(job) && job.status === "failed";
      case "next_attempt": return Boolean(job) && job.attempts > a.attempts;
      default: return false;
    }
  };
  return { asked, unfollowed, done, stop: () => { for (const t of states.keys()) unfollow(t); } };
}

/** Retry Sync's submissions: followed on the team channel's rows (always open), each done once its row leaves
 * sync_failed; read once as they stand now, for a cluster whose report landed before the answer did. */
function watchSubmissions(pending) {
  const asked = [];
  const seen = new Map(); // submission -> its latest status, streamed
  for (const p of pending) for (const id of p.submissions || []) if (!asked.some((a) => a.id === id)) asked.push({ id, cluster: p.cluster });
  const unfollowed = new Map(pending.map((p) => [p.cluster, 0]));
  const off = app.team.onSubmissions((rows) => { for (const r of rows) seen.set(r.id, r.status); });
  let failed = null; // the team's submissions whose sync failed, as read once (null: not read, or too many to read)
  fetch(`/api/teams/${app.teamId}/submissions?status=sync_failed&limit=500`).then((r) => r.json()).then((page) => {
    if (Array.isArray(page.rows) && page.total <= page.rows.length) failed = new Set(page.rows.map((r) => r.id));
  }).catch(() => {});
  const done = (a) => (seen.has(a.id) ? seen.get(a.id) !== "sync_failed" : failed !== null && !failed.has(a.id));
  return { asked, unfollowed, done, stop: off };
}

/** How long a cluster has been silent, in the words of the gateway's own toast (core/control.py silent_for). */
function silentSince(seconds) {
  const minutes = Math.floor(seconds / 60);
  return minutes < 1 ? "under a minute" : minutes < 120 ? `${minutes} min` : `${Math.floor(minutes / 60)} h`;
}

/** "gpu-2", "gpu-2 and tape-9", "cpu-big, gpu-2 and tape-9". */
function andList(names) {
  return names.length > 1 ? `${names.slice(0, -1).join(", ")} and ${names[names.length - 1]}` : names[0] || "";
}

function silentFor(seconds) {
  const minutes = Math.round(seconds / 60);
  return minutes < 1 ? "less than a minute" : minutes < 90 ? `${minutes} min` : `${Math.round(minutes / 60)} h`;
}

/** Retry Failed Jobs of a trajectory: the person started that work again, its finish is theirs. It acts at once,
 * unless a cluster holding the failed jobs is silent: then it asks first, naming it (such a cluster retries them only
 * once it reports again). */
async function retryFailed(id, name = `trajectory ${id}`, opener = null) {
  if (!(await silentAsked(`/api/trajectories/${id}/retry-failed/preview`, { method: "GET" }, (body) => {
    const jobs = `${count(body.tasks)} failed job${body.tasks === 1 ? "" : "s"}`;
    return { title: `Retry ${jobs} of ${name} on ${onClusters(body.clusters)}?`, text: "They run again as a new attempt.", confirm: `Retry ${jobs}` };
  }, opener))) return null;
  rememberMine(id);
  return acting("Retry Failed Jobs", () => send(`/api/trajectories/${id}/retry-failed`)).then(followOutcome);
}

/** An action that does not ask first (Hold, Retry Failed ...) asks when a cluster it would act on is silent, naming
 * it: whether to act now anyway (the cluster acts once it reports again). True: act; false: the person cancelled.
 * `words(body)`: the dialog's title, text and confirm label from the preview. When the preview cannot be read the
 * action goes ahead, as it always did. */
export async function silentAsked(url, options, words, opener) {
  const { ok, body } = await send(url, options).catch(() => ({ ok: false, body: {} }));
  if (!ok || !body.tasks || !silentNote(body.clusters || [])) return true;
  const said = words(body);
  return confirmDialog({ title: said.title, text: (said.text + silentNote(body.clusters)).trim(), confirm: said.confirm, opener });
}

/** Retry Failed Frames of the analysis a failed job belongs to (from its trajectory's jobs, opened: the
 * trajectory's finishes are the person's already). */
export const retryFrames = (analysisId, plugin) =>
  acting(`Retry Failed Frames of ${plugin}`, () => send(`/api/analyses/${analysisId}/retry-failed`)).then(followOutcome);

/** The name of the cluster a job runs on, from the team's clusters (a cluster added since the page loaded is
 * read again, once). Nothing in local mode, where the one cluster is this machine. */
export function clusterName(id) {
  if (app.me && app.me.local) return "";
  const name = app.clusterNames.get(id);
  if (name !== undefined) return name;
  if (!asked.has(id)) {
    asked.add(id);
    fetch(`/api/teams/${app.teamId}/members`).then((r) => r.json()).then((body) => {
      for (const c of body.clusters || []) app.clusterNames.set(c.id, c.name);
      app.schedule();
    }).catch(() => {});
  }
  return `cluster ${id}`;
}
const asked = new Set(); // cluster ids read again

// -- analyses

const analyses = new Map(); // trajectory id -> { rows: Map(id -> row), list: [...], at: ms, loading: Promise|null }
const REFRESH = 2000; // ms: the listing's counts refresh at most this often while someone looks

export function analysesOf(trajectoryId) {
  let a = analyses.get(trajectoryId);
  if (!a) analyses.set(trajectoryId, (a = { rows: new Map(), list: null, at: 0, loading: null, error: null }));
  return a;
}

/** Fetch the listing again unless it is fresh (`force`: now). */
export function loadAnalyses(trajectoryId, force = false) {
  const a = analysesOf(trajectoryId);
  if (a.loading || (!force && Date.now() - a.at < REFRESH)) return a.loading;
  a.loading = (async () => {
    try {
      const { ok, body } = await send(`/api/trajectories/${trajectoryId}/analyses`, { method: "GET" });
      a.error = ok ? null : body.message || "The analyses could not be loaded";
      if (ok) { a.list = body.analyses; a.rows = new Map(body.analyses.map((r) => [r.id, r])); }
    } catch {
      a.error = "The gateway could not be reached";
    } finally {
      a.at = Date.now();
      a.loading = null;
      app.schedule();
    }
  })();
  return a.loading;
}

function learnAnalyses(trajectoryId, jobs) {
  // An analysis the listing does not know yet (a new pipeline run): its start time is worth a fetch.
  const a = analysesOf(trajectoryId);
  for (const job of jobs) {
    if (job.analysis_id !== null && !job.removed_at && !a.rows.has(job.analysis_id)) { loadAnalyses(trajectoryId); return; }
  }
}

/** What tells same-named jobs apart: the start time of the pipeline run that made the job's analysis, else when
 * the job was created (and started, once it has: each time named for what it is). */
export function runLabel(trajectoryId) {
  return (job) => {
    const row = job.analysis_id !== null ? analysesOf(trajectoryId).rows.get(job.analysis_id) : null;
    const now = app.live.now();
    if (row) return `run started ${clock(row.created_at, now)}`;
    if (!job.created_at) return `#${job.id}`;
    return `created ${clock(job.created_at, now)}${job.started_at ? `, started ${clock(job.started_at, now)}` : ""}`;
  };
}
