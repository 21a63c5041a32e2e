// The estimated time left in words: `node --test frontend/tests/`.
import { test } from "node:test";
import assert from "node:assert/strict";
import { analysisCounts, longerThanUsual, overrunOf, stuckCount, timeLeft, timeLeftShort, unfinished, whyUnknown } from "../js/eta.js";

test("the time left in the words a person expects", () => {
  const cases = [
    [null, "time left unknown"], [undefined, "time left unknown"], [0, "less than a minute left"],
    [59, "less than a minute left"], [60, "about 1 min left"], [720, "about 12 min left"],
    [3569, "about 59 min left"], [3600, "about 1 h left"], [4800, "about 1 h 20 min left"],
    [9 * 3600 + 50 * 60, "about 9 h 50 min left"], [36000, "about 10 h left"], [47 * 3600, "about 47 h left"],
    [3 * 86400, "about 3 days left"],
  ];
  for (const [seconds, words] of cases) assert.equal(timeLeft(seconds), words, String(seconds));
});

test("a column headed TIME LEFT says it shorter", () => {
  assert.deepEqual([timeLeftShort(720), timeLeftShort(30), timeLeftShort(null)], ["about 12 min", "less than a minute", "unknown"]);
});

test("only unfinished work has a time left", () => {
  assert.equal(unfinished({ queued: 0, retrying: 0, running: 1, completed: 4 }), true);
  assert.equal(unfinished({ holding: 2 }), true);
  assert.equal(unfinished({ queued: 0, running: 0, completed: 9, failed: 1 }), false);
  assert.equal(unfinished(undefined), false);
});

test("a job running longer than usual says the multiple", () => {
  assert.equal(longerThanUsual(4), "running 4× longer than usual");
  assert.equal(longerThanUsual(12), "running 12× longer than usual");
  assert.equal(longerThanUsual(null), null);
  assert.deepEqual([stuckCount(3), stuckCount(1), stuckCount(0), stuckCount(1200)],
    ["3 running longer than usual", "1 running longer than usual", "", "1,200 running longer than usual"]);
});

test("a job's multiple comes from its trajectory's summary while it runs", () => {
  const summary = { stuck: 1, overruns: [{ id: 7, times: 5 }] };
  assert.equal(overrunOf(summary, { id: 7, status: "running" }), 5);
  assert.equal(overrunOf(summary, { id: 7, status: "completed" }), null); // it finished: no longer stuck
  assert.equal(overrunOf(summary, { id: 8, status: "running" }), null);
  assert.equal(overrunOf({ stuck: 0 }, { id: 7, status: "running" }), null);
  assert.equal(overrunOf(undefined, { id: 7, status: "running" }), null);
});

test("an unknown time left says why in its tooltip, and a known one needs no reason", () => {
  const running = { queued: 4, running: 2, completed: 9 };
  assert.match(whyUnknown(null, running, "tasks"), /^unknown: nothing to time it from yet: fewer than 5 tasks of one of its kinds/);
  assert.match(whyUnknown(undefined, running), /fewer than 5 jobs .* such jobs hold every worker ahead of it$/);
  assert.equal(whyUnknown(null, { running: 1, holding: 1 }, "tasks"),
    "unknown: a task is holding: it waits for a person, and nobody can say when it goes on");
  assert.equal(whyUnknown(null, { queued: 3, silent: 2 }),
    "unknown: its cluster has gone silent, so nobody can say when its jobs finish");
  assert.equal(whyUnknown(720, running), null); // "about 12 min": the words say it
  assert.equal(whyUnknown(null, { completed: 9 }), null); // done: no time left is shown at all
});

test("the panel's analyses say why their time left is unknown, from the listing's counts", () => {
  // The listing's `queued` holds the holding jobs: one holding says so, not "nothing to time it from".
  const holding = analysisCounts({ running: 0, queued: 3, holding: 1, silent: 0 });
  assert.deepEqual(holding, { running: 0, queued: 2, holding: 1, silent: 0 });
  assert.match(whyUnknown(null, holding), /^unknown: a job is holding/);
  assert.match(whyUnknown(null, analysisCounts({ running: 0, queued: 2, silent: 2 })), /cluster has gone silent/);
  assert.match(whyUnknown(null, analysisCounts({ running: 4, queued: 20 })), /^unknown: nothing to time it from yet/);
  assert.equal(whyUnknown(1800, analysisCounts({ running: 4, queued: 20 })), null); // "about 30 min left"
});
