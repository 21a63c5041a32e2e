// A newer row wins: the Submissions window read again and the rows the team channel streamed
// (`node --test frontend/tests/`).
import { test } from "node:test";
import assert from "node:assert/strict";
import { mergeWindow, micros, newer, sameRow, Streamed } from "../js/window_rows.js";

const row = (id, updated_at, extra = {}) => ({ id, status: "pending", counts: { queued: 1 }, updated_at, version: 1, ...extra });

test("updated_at is compared to the microsecond, whatever its fraction's length or offset", () => {
  assert.ok(micros("2026-12-07T00:50:38.000002Z") > micros("2026-12-07T00:50:38.000001Z"));
  assert.ok(micros("2026-12-07T00:50:38.5Z") > micros("2026-12-07T00:50:38Z")); // the strings sort the other way
  assert.equal(micros("2026-12-07T01:50:38.25+01:00"), micros("2026-12-07T00:50:38.250000Z"));
  assert.equal(micros(null), -Infinity);
});

test("a newer row is newer by updated_at, then by its record's version; a tie is not newer", () => {
  const a = row(1, "2026-12-07T00:50:38.1Z"), b = row(1, "2026-12-07T00:50:38.2Z");
  assert.ok(newer(b, a) && !newer(a, b));
  assert.ok(newer({ ...a, version: 2 }, a));
  assert.ok(!newer(a, { ...a }));
});

test("a row streamed just before the read began wins over the read's older copy", () => {
  // The race of issue #50: the channel streamed the row, then a window read found the older saved copy.
  const streamedRow = row(7, "2026-12-07T00:50:39.000100Z", { status: "running", counts: { running: 1 } });
  const shown = new Map([[7, streamedRow]]);
  const read = [row(6, "2026-12-07T00:50:30Z"), row(7, "2026-12-07T00:50:39Z")];
  const merged = mergeWindow(read, { shown, streamed: new Map(shown) });
  assert.equal(merged[1], streamedRow);
  assert.equal(merged[0], read[0]);
});

test("a row streamed before the read, not yet in the window (it enters), also wins over an older read", () => {
  const streamed = new Streamed();
  const fresh = row(9, "2026-12-07T00:50:40Z", { status: "failed" });
  streamed.keep(fresh);
  assert.equal(mergeWindow([row(9, "2026-12-07T00:50:35Z")], { streamed })[0], fresh);
});

test("the read wins when it is newer, and a tie goes to it unless the row streamed while it was read", () => {
  const old = row(3, "2026-12-07T00:50:30Z");
  const read = [row(3, "2026-12-07T00:50:31Z", { status: "success" })];
  assert.equal(mergeWindow(read, { shown: new Map([[3, old]]) })[0], read[0]);
  const tie = row(3, "2026-12-07T00:50:31Z", { eta: 60 });
  assert.equal(mergeWindow(read, { streamed: new Map([[3, tie]]) })[0], read[0]);
  assert.equal(mergeWindow(read, { during: new Map([[3, tie]]) })[0], tie);
  const during = row(3, "2026-12-07T00:50:30Z"); // streamed meanwhile, but older than what the read found
  assert.equal(mergeWindow(read, { during: new Map([[3, during]]) })[0], read[0]);
});

test("a read copy that says what the shown row says keeps the shown object: the row is not drawn again", () => {
  const shown = row(4, "2026-12-07T00:50:30Z");
  const merged = mergeWindow([JSON.parse(JSON.stringify(shown))], { shown: new Map([[4, shown]]) });
  assert.equal(merged[0], shown);
  assert.ok(!sameRow(shown, { ...shown, counts: { queued: 2 } }));
  assert.ok(!sameRow(shown, { ...shown, eta: 5 }));
});

test("the streamed rows keep the latest copy of each to arrive, at most their limit", () => {
  const s = new Streamed(2);
  s.keep(row(1, "2026-12-07T00:50:31Z"));
  s.keep(row(2, "2026-12-07T00:50:31Z"));
  s.keep(row(1, "2026-12-07T00:50:32Z")); // 1 changed again: 2 is now the longest unchanged
  s.keep(row(3, "2026-12-07T00:50:31Z"));
  assert.deepEqual([...s.keys()], [1, 3]);
  assert.equal(s.get(1).updated_at, "2026-12-07T00:50:32Z");
});

test("a row streamed while the read was on its way wins over a shown copy that says it is newer", () => {
  // The channel's order is the truth: the latest copy to arrive is what the relay made last.
  const shown = row(5, "2026-12-07T00:50:40Z", { status: "running" });
  const d = row(5, "2026-12-07T00:50:39Z", { status: "success" });
  const read = [row(5, "2026-12-07T00:50:38Z")];
  assert.equal(mergeWindow(read, { shown: new Map([[5, shown]]), during: new Map([[5, d]]) })[0], d);
});
