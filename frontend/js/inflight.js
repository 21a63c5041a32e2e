// The header ring fills with the work in hand, not with the team's whole day: of the jobs of every trajectory
// with work left, and of every trajectory finished since the oldest of those took work on, the share finished
// (completed or failed). It is full only when nothing is left, and a new batch starts it from empty again.
// `node --test frontend/tests/` checks it.
import { unfinished } from "./eta.js";

const finished = (c) => (c.completed || 0) + (c.failed || 0) + (c.preempted || 0);
const all = (c) => Object.values(c).reduce((a, n) => a + (n || 0), 0);

/** The share (0..1) of the work in hand that is finished. `started`: trajectory id -> when (ms) it was first
 * seen with work left; a finished trajectory counts while it changed at or after the oldest of those. */
export function inFlightFill(summaries, started) {
  let since = Infinity;
  for (const s of summaries) if (unfinished(s.counts) && started.has(s.id)) since = Math.min(since, started.get(s.id));
  if (since === Infinity) return 1; // nothing left to do: everything is done
  let done = 0;
  let total = 0;
  for (const s of summaries) {
    if (!s.counts) continue;
    if (!unfinished(s.counts) && !(Date.parse(s.updated_at || "") >= since)) continue;
    done += finished(s.counts);
    total += all(s.counts);
  }
  return total ? done / total : 1;
}

/** Remembers when each trajectory was first seen with work left (forgotten once it has none). A trajectory
 * with work left when the page loads counts from its last change: the page knows no earlier moment. */
export class WorkInHand {
  constructor() { this.started = new Map(); }

  fill(summaries, now = Date.now()) {
    const list = [...summaries];
    for (const s of list) {
      if (!unfinished(s.counts)) { this.started.delete(s.id); continue; }
      if (this.started.has(s.id)) continue;
      const changed = Date.parse(s.updated_at || "");
      this.started.set(s.id, Number.isFinite(changed) ? Math.min(changed, now) : now);
    }
    return inFlightFill(list, this.started);
  }
}
