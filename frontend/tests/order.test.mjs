// Nothing moves under the pointer: the order a held list shows (`node --test frontend/tests/`).
import { test } from "node:test";
import assert from "node:assert/strict";
import { StableOrder } from "../js/order.js";

test("a list that is not held shows the latest order", () => {
  const o = new StableOrder();
  assert.deepEqual(o.next([3, 2, 1], false), [3, 2, 1]);
  assert.deepEqual(o.next([1, 3, 2], false), [1, 3, 2]);
  assert.equal(o.waiting, 0);
});

test("a held list keeps its places; new ids wait, announced; ids gone stay until it catches up", () => {
  const o = new StableOrder();
  o.next([3, 2, 1], false);
  assert.deepEqual(o.next([1, 5, 4, 3], true), [3, 2, 1]);
  assert.equal(o.waiting, 2);
  assert.deepEqual(o.next([1, 5, 4, 3], false), [1, 5, 4, 3]); // the pointer left
  assert.equal(o.waiting, 0);
});

test("an empty list has no places to keep, and release shows the latest at once", () => {
  const o = new StableOrder();
  o.next([], false);
  assert.deepEqual(o.next([2, 1], true), [2, 1]);
  o.next([3, 2, 1], true);
  assert.equal(o.waiting, 1);
  o.release();
  assert.deepEqual(o.next([3, 2, 1], true), [3, 2, 1]);
});
