// The estimated time left, in words (the relay estimates it: gateway/core/eta.py; null while it cannot tell).
// Shown only for work still to do: a trajectory, an analysis or a submission with jobs queued, running or held.

/** Whether counts per status hold unfinished work. */
export function unfinished(counts) {
  if (!counts) return false;
  return (counts.queued || 0) + (counts.retrying || 0) + (counts.running || 0) + (counts.holding || 0) + (counts.silent || 0) > 0;
}

/** "about 12 min left", "less than a minute left", "about 1 h 20 min left", "time left unknown". */
export function timeLeft(seconds) {
  const words = duration(seconds);
  return words === null ? "time left unknown" : `${words} left`;
}

/** The same for a column headed TIME LEFT: "about 12 min", "less than a minute", "unknown". */
export function timeLeftShort(seconds) {
  return duration(seconds) ?? "unknown";
}

/** Why the time left of unfinished work (`counts`) reads unknown, for the word's tooltip: a job holding, a silent
 * cluster, or nothing yet to time its kinds from (the relay's reasons, gateway/core/eta.py). Null while it is known
 * (`seconds` a figure): the figure's own words say it. `noun`: "jobs", or "tasks" on the Submissions page. */
export function whyUnknown(seconds, counts, noun = "jobs") {
  if (duration(seconds) !== null || !unfinished(counts)) return null;
  const one = noun.replace(/s$/, "");
  if (counts.holding) return `unknown: a ${one} is holding: it waits for a person, and nobody can say when it goes on`;
  if (counts.silent) return `unknown: its cluster has gone silent, so nobody can say when its ${noun} finish`;
  return `unknown: nothing to time it from yet: fewer than 5 ${noun} of one of its kinds (a first transfer, preview`
    + ` or artifact upload) have finished on its cluster, or such ${noun} hold every worker ahead of it`;
}

/** An analysis row of the panel's listing (GET /api/trajectories/<id>/analyses) as counts per status for
 * `whyUnknown`: its `queued` holds the jobs holding too. */
export function analysisCounts(row) {
  const holding = row.holding || 0;
  return { running: row.running || 0, queued: Math.max(0, (row.queued || 0) - holding), holding, silent: row.silent || 0 };
}

// Work that is stuck: the relay names a running job that has run 4 times as long as its kind usually takes on
// its cluster (gateway/core/eta.py, `longer_than_usual`: STUCK_MULTIPLE), with the multiple, rounded.

/** "running 4× longer than usual" (null: it is not). */
export function longerThanUsual(times) {
  return Number.isFinite(times) && times > 0 ? `running ${times}× longer than usual` : null;
}

/** The popover's count: "3 running longer than usual" ("" for none). */
export function stuckCount(n) {
  return n > 0 ? `${n.toLocaleString("en-US")} running longer than usual` : "";
}

/** How many times longer than usual a job runs, from its trajectory's summary (null: not longer than usual). */
export function overrunOf(summary, job) {
  if (!summary || !summary.overruns || !job || job.status !== "running") return null;
  const o = summary.overruns.find((x) => x.id === job.id);
  return o ? o.times : null;
}

function duration(seconds) {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds) || seconds < 0) return null;
  if (seconds < 60) return "less than a minute";
  const minutes = Math.round(seconds / 60);
  if (minutes < 60) return `about ${minutes} min`;
  if (seconds < 10 * 3600) {
    const tens = Math.round(seconds / 600) * 10; // to ten minutes: "about 1 h 20 min"
    const h = Math.floor(tens / 60), m = tens % 60;
    return m ? `about ${h} h ${m} min` : `about ${h} h`;
  }
  const hours = Math.round(seconds / 3600);
  if (hours < 48) return `about ${hours} h`;
  return `about ${Math.round(seconds / 86400)} days`;
}
