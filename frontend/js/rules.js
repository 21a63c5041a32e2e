// The Jobs view's rules for the browser. One definition lives in the gateway's core (gateway/core/status.py,
// grouping.py, finish.py); this mirror must pass the same JSON vectors (frontend/vectors/jobs-view.json).

export const BUCKET_OF = { queued: "queued", retrying: "queued", holding: "queued", running: "running", completed: "done", failed: "failed", preempted: "failed", silent: "silent" };
const SILENCEABLE = new Set(["queued", "retrying", "running"]);
const TRANSFERS = new Set(["trajectory_transfer", "analysis_transfer", "storage_transfer"]);
// How each status is shown, a job's or a group's: [word, colour]. Colour is never the only signal.
const SHOWN = {
  queued: ["queued", "amber"], retrying: ["retrying", "amber"], running: ["running", "blue"],
  completed: ["completed", "green"], failed: ["failed", "red"], holding: ["holding", "amber"],
  preempted: ["preempted", "red"], silent: ["cluster silent", "grey"],
  neutral: ["partly failed", "neutral"], empty: ["", "neutral"],
};

export function buckets(counts) {
  const out = { queued: 0, running: 0, silent: 0, done: 0, failed: 0 };
  for (const [status, n] of Object.entries(counts)) if (BUCKET_OF[status]) out[BUCKET_OF[status]] += n;
  return out;
}

export function groupStatus(counts) {
  const b = buckets(counts);
  if (b.running) return "running";
  if (b.queued) return "queued";
  if (b.silent) return "silent";
  if (!b.done && !b.failed) return "empty";
  if (!b.failed) return "completed";
  if (!b.done) return "failed";
  return "neutral";
}

/** The status a job is listed with: `silent` while its cluster is silent and the job unfinished (the delta
 * keeps its stored status and says since when: `silent_since`). */
export const listedStatus = (job) => (job.silent_since && SILENCEABLE.has(job.status) ? "silent" : job.status);

export const colour = (status) => (SHOWN[status] ? SHOWN[status][1] : "neutral");

/** The word next to the colour; a status no table knows yet (a later migration's) shows as itself. */
export const word = (status) => (SHOWN[status] ? SHOWN[status][0] : String(status ?? ""));

export function ringLabel(counts) {
  const b = buckets(counts);
  if (b.running) return `${b.running} running`;
  if (b.queued) return `${b.queued} queued`;
  if (b.silent) return `${b.silent} silent`;
  return "Jobs";
}

export function ringFill(counts) {
  const total = Object.values(counts).reduce((a, n) => a + n, 0);
  return total ? buckets(counts).done / total : 0;
}

export function groupKey(kind, frame) {
  if (TRANSFERS.has(kind)) return "transfers";
  if (frame === null || frame === undefined) return "general";
  return `frame:${frame}`;
}

export function groupLabel(key, jobs) {
  if (key === "transfers") return jobs === 1 ? "Storage Transfer" : "Storage Transfers";
  if (key === "general") return "General";
  return `Frame ${key.slice(6)}`;
}

export const groupOpensByItself = (key) => key === "transfers";

export const MAX_ATTEMPTS = 3; // gateway/core/status.py: a job's automatic attempts

/** Which attempt a job is on, from the second: "attempt 2 of 3"; past its automatic attempts (a person retried
 * it) "attempt 4"; nothing on its first. */
export function attemptLabel(attempts) {
  if (!(attempts > 1)) return "";
  return attempts <= MAX_ATTEMPTS ? `attempt ${attempts} of ${MAX_ATTEMPTS}` : `attempt ${attempts}`;
}

export function noticeTitle(analysis, rasterize, failed) {
  const what = analysis ? "Analysis" : rasterize ? "Rasterization" : "Jobs";
  if (failed) return [`${what} completed with errors`, "warning"];
  return [analysis ? "Analysis completed successfully!" : `${what} completed successfully`, "success"];
}

// The Submissions page's menu: only the actions that apply to every selected row (gateway/core/menu.py).
const TAKES = { hold: ["queued", "retrying"], unhold: ["holding"], kill: ["queued", "retrying", "running", "holding"],
  retry: ["completed", "failed", "preempted", "queued", "retrying", "running", "holding"], retry_failed: ["failed"],
  retry_preempted: ["preempted"] };
const STAGING = new Set(["upload_pending", "uploading", "sync_pending", "syncing", "sync_failed"]);
const MENU_ORDER = [...Object.keys(TAKES), "retry_sync", "reviewed", "instance_type", "priority"];

function rowActions(staging, counts) {
  const has = (s) => (counts[s] || 0) > 0;
  const applies = new Set(["reviewed", "priority"]);
  for (const [name, takes] of Object.entries(TAKES)) if (takes.some(has)) applies.add(name);
  if (staging === "sync_failed") applies.add("retry_sync");
  const total = Object.values(counts).reduce((a, b) => a + b, 0);
  if (STAGING.has(staging) || !total || ["queued", "retrying", "holding"].some(has)) applies.add("instance_type");
  return applies;
}

/** rows: [{staging, counts}]; the actions that apply to every one, in the menu's order. */
export function menuActions(rows) {
  let common = null;
  for (const r of rows) {
    const each = rowActions(r.staging, r.counts || {});
    common = common === null ? each : new Set([...common].filter((a) => each.has(a)));
  }
  return MENU_ORDER.filter((a) => common && common.has(a));
}
