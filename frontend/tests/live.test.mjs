// The live connection's wire handling: `node --test frontend/tests/`.
import { test } from "node:test";
import assert from "node:assert/strict";
import { withDefaults } from "../js/live.js";

test("fields left out of a batch at their default come back", () => {
  const m = withDefaults({ type: "batch", jobs: [{ id: 1, version: 2, status: "queued" }, { id: 2, attempts: 3, error: "OOM" }],
    groups: [{ key: "frame:4", frame: 4, total: 1 }, { key: "transfers", open: true, total: 2 }] });
  assert.equal(m.jobs[0].attempts, 1);
  assert.equal(m.jobs[0].timestep, null);
  assert.equal(m.jobs[0].removed_at, null);
  assert.equal(m.jobs[1].attempts, 3);
  assert.equal(m.jobs[1].error, "OOM");
  assert.deepEqual([m.groups[0].timestep, m.groups[0].open, m.groups[1].open, m.groups[1].frame], [null, false, true, null]);
});

test("messages without jobs pass untouched", () => {
  const m = { type: "summary", counts: { queued: 1 } };
  assert.deepEqual(withDefaults(m), { type: "summary", counts: { queued: 1 } });
});
