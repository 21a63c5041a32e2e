// The one clock and the one way of writing a count, for every page (frontend/js/ui.js).
import { test } from "node:test";
import assert from "node:assert/strict";
import { actedBy, clock, count, moment, timeOfDay } from "../js/ui.js";

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

test("a moment reads as the browser's own toLocale calls wrote it, from formatters made once", () => {
  const at = new Date(2026, 11, 6, 15, 30, 5), now = new Date(2026, 11, 6, 18, 0);
  const yesterday = new Date(2026, 11, 5, 9, 4, 7);
  const time = (d, seconds) => d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", hourCycle: "h23", ...(seconds ? { second: "2-digit" } : {}) });
  assert.equal(clock(at.toISOString(), now.getTime()), time(at, true));
  assert.equal(clock(yesterday.toISOString(), now.getTime()), `${yesterday.toLocaleDateString()} ${time(yesterday, true)}`);
  assert.equal(clock(""), "");
  assert.equal(moment(at.toISOString()), at.toLocaleString([], { hourCycle: "h23" }));
  assert.equal(actedBy("Killed", "Ada Lovelace", at.toISOString(), now.getTime()), `Killed by Ada Lovelace at ${time(at)}`);
  assert.equal(actedBy("Killed", "Ada", yesterday.toISOString(), now.getTime()), `Killed by Ada at ${yesterday.toLocaleDateString()} ${time(yesterday)}`);
});
