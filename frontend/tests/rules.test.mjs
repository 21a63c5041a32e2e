// The browser's rules against the shared vectors: `node --test frontend/tests/`.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import * as rules from "../js/rules.js";

const v = JSON.parse(readFileSync(new URL("../vectors/jobs-view.json", import.meta.url)));

test("statuses: word, colour and bucket", () => v.statuses.forEach((c) => {
  assert.deepEqual([rules.word(c.status), rules.colour(c.status), rules.BUCKET_OF[c.status] ?? null], [c.word, c.colour, c.bucket], c.status);
}));
test("a status no table knows shows as itself", () => assert.deepEqual([rules.word("frozen"), rules.colour("frozen")], ["frozen", "neutral"]));
test("buckets", () => v.buckets.forEach((c) => assert.deepEqual(rules.buckets(c.counts), c.expect)));
test("group status", () => v.group_status.forEach((c) => assert.equal(rules.groupStatus(c.counts), c.expect, c.why)));
test("colour", () => v.colour.forEach((c) => assert.equal(rules.colour(c.status), c.expect)));
test("ring label", () => v.ring_label.forEach((c) => assert.equal(rules.ringLabel(c.counts), c.expect)));
test("ring fill", () => v.ring_fill.forEach((c) => assert.equal(rules.ringFill(c.counts), c.expect)));
test("group key", () => v.group_key.forEach((c) => assert.equal(rules.groupKey(c.kind, c.frame), c.expect)));
test("group label", () => v.group_label.forEach((c) => assert.equal(rules.groupLabel(c.key, c.jobs), c.expect)));
test("groups that open by themselves", () => v.group_opens_by_itself.forEach((c) => assert.equal(rules.groupOpensByItself(c.key), c.expect)));
test("listed status", () => v.listed_status.forEach((c) => assert.equal(rules.listedStatus(c.job), c.expect, c.why)));
test("attempt label", () => v.attempt_label.forEach((c) => assert.equal(rules.attemptLabel(c.attempts), c.expect, c.why)));
test("notice title", () => v.notice_title.forEach((c) => assert.deepEqual(rules.noticeTitle(c.analysis, c.rasterize, c.failed), c.expect)));
test("the menu offers only what applies to every selected row", () => v.menu_actions.forEach((c) => assert.deepEqual(rules.menuActions(c.rows), c.expect, c.why)));
