// Which copy of a submission's row the Submissions page shows when it reads a window: the read's and those the
// team channel streamed can disagree (a row streamed just before the read began whose saved copy the read found
// older; a row streamed while the read was on its way, older than what the read found). The newer copy wins, by
// the row's `updated_at` (the submission's or its latest task change's time, gateway.core.submission.SubmissionRow,
// which only moves forward), then its record's `version`. Streamed rows themselves apply as they come: the channel
// delivers a row's copies in the order they were made. Pure functions: frontend/tests/window_rows.test.mjs.

/** `updated_at` in microseconds since the epoch (Date.parse keeps milliseconds only); null: older than any. */
export function micros(iso) {
  if (!iso) return -Infinity;
  const fraction = /\.(\d+)/.exec(iso);
  const whole = Date.parse(fraction ? iso.replace(fraction[0], "") : iso);
  if (Number.isNaN(whole)) return -Infinity;
  return whole * 1000 + (fraction ? Number(fraction[1].padEnd(6, "0").slice(0, 6)) : 0);
}

/** Whether row `a` is strictly newer than row `b` (a tie is not). */
export function newer(a, b) {
  const x = micros(a.updated_at), y = micros(b.updated_at);
  if (x !== y) return x > y;
  return (a.version || 0) > (b.version || 0);
}

/** Whether two copies of a row say the same (one level into objects: `counts`). */
export function sameRow(a, b) {
  if (a === b) return true;
  const keys = Object.keys(a);
  if (keys.length !== Object.keys(b).length) return false;
  for (const k of keys) {
    const x = a[k], y = b[k];
    if (x === y) continue;
    if (!x || !y || typeof x !== "object" || typeof y !== "object") return false;
    const inner = Object.keys(x);
    if (inner.length !== Object.keys(y).length || inner.some((i) => x[i] !== y[i])) return false;
  }
  return true;
}

/** A window's rows as the page shows them: per row, a copy streamed while the read was on its way (`during`)
 * unless the read's is newer; else the newest of the read's, the one shown (`shown`: id -> row) and the latest
 * streamed (`streamed`), a tie going to the read. A copy that says what the shown one says keeps the shown object,
 * so a window read again redraws only the rows that changed. */
export function mergeWindow(read, { shown = new Map(), streamed = new Map(), during = new Map() } = {}) {
  return read.map((r) => {
    const d = during.get(r.id);
    let best = r;
    if (d) best = newer(r, d) ? r : d;
    else for (const c of [shown.get(r.id), streamed.get(r.id)]) if (c && newer(c, best)) best = c;
    const old = shown.get(r.id);
    return old && best !== old && sameRow(old, best) ? old : best;
  });
}

/** The latest streamed copy of each row, by id, at most `limit` (the longest unchanged leave first). The channel
 * delivers a row's copies in the order they were made, so the latest to arrive is kept as it is. */
export class Streamed extends Map {
  constructor(limit = 2000) {
    super();
    this.limit = limit;
  }

  keep(row) {
    this.delete(row.id);
    this.set(row.id, row);
    if (this.size > this.limit) this.delete(this.keys().next().value);
  }
}
