// The ring's rule: the work in hand, full only when everything is done. `node --test frontend/tests/`.
import { test } from "node:test";
import assert from "node:assert/strict";
import { WorkInHand, inFlightFill } from "../js/inflight.js";

const at = (min) => new Date(Date.UTC(2026, 0, 1, 12, min)).toISOString();
const ms = (min) => Date.parse(at(min));
const t = (id, counts, min) => ({ id, counts, updated_at: at(min) });

test("the ring is full only when nothing is left to do", () => {
  assert.equal(inFlightFill([t(1, { completed: 49 }, 0), t(2, { completed: 3, failed: 1 }, 5)], new Map()), 1);
  assert.equal(inFlightFill([], new Map()), 1);
});

test("a trajectory finished before the oldest work in hand started does not fill the ring", () => {
  const done = t(1, { completed: 49 }, 0); // this morning's batch, all done
  const busy = t(2, { queued: 8, running: 1, completed: 1 }, 30);
  assert.equal(inFlightFill([done, busy], new Map([[2, ms(20)]])), 0.1);
});

test("a trajectory finished since the oldest work in hand started counts as done", () => {
  const finishedSince = t(1, { completed: 9, failed: 1 }, 25);
  const busy = t(2, { running: 10 }, 30);
  assert.equal(inFlightFill([finishedSince, busy], new Map([[2, ms(20)]])), 0.5);
});

test("the tracker starts a new batch from empty once the last one is done", () => {
  const w = new WorkInHand();
  assert.equal(w.fill([t(1, { queued: 4 }, 0)], ms(0)), 0);
  assert.equal(w.fill([t(1, { running: 2, completed: 2 }, 1)], ms(1)), 0.5);
  assert.equal(w.fill([t(1, { completed: 4 }, 2)], ms(2)), 1);
  // The next submission: the finished one (before it started) no longer counts.
  assert.equal(w.fill([t(1, { completed: 4 }, 2), t(2, { queued: 3, completed: 1 }, 10)], ms(10)), 0.25);
});
