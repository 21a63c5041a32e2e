// The one clock and the one way of writing a count, for every page (frontend/js/ui.js).
import { test } from "node:test";
import assert from "node:assert/strict";
import { count, timeOfDay } from "../js/ui.js";

test("a time of day is on a 24-hour clock, whatever the locale's habit", () => {
  const late = new Date(2026, 11, 6, 15, 30, 5); // local time
  assert.equal(timeOfDay(late), "15:30");
  assert.equal(timeOfDay(late, { seconds: true }), "15:30:05");
  assert.equal(timeOfDay(new Date(2026, 11, 6, 3, 30)), "03:30");
  assert.doesNotMatch(timeOfDay(late), /AM|PM/);
});

test("a count has its thousands grouped", () => {
  assert.equal(count(119594), new Intl.NumberFormat().format(119594));
  assert.notEqual(count(119594), "119594");
  assert.equal(count(7), "7");
});
