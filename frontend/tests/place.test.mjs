// A list's rows put in their new order with as few moves as there are (`placeChildren`, ui.js): a moved node is
// laid out again from nothing by the browser, so a redraw that moves one row must not move the others.
import { test } from "node:test";
import assert from "node:assert/strict";
import { placeChildren } from "../js/ui.js";

/** A parent with the DOM's child links and a count of the nodes inserted or removed. */
class Parent {
  constructor(names) { this.kids = []; this.moves = 0; for (const n of names) this.insertBefore(node(n), null); this.moves = 0; }
  get firstChild() { return this.kids[0] || null; }
  insertBefore(n, ref) {
    if (n.parentNode) n.parentNode.kids.splice(n.parentNode.kids.indexOf(n), 1); // a move counts once
    const i = ref ? this.kids.indexOf(ref) : this.kids.length;
    this.kids.splice(i, 0, n);
    n.parentNode = this;
    this.moves++;
  }
  removeChild(n) { this.kids.splice(this.kids.indexOf(n), 1); n.parentNode = null; this.moves++; }
  names() { return this.kids.map((n) => n.name); }
}
function node(name) {
  const n = { name, parentNode: null };
  Object.defineProperty(n, "nextSibling", { get() { const k = n.parentNode.kids; return k[k.indexOf(n) + 1] || null; } });
  return n;
}
const byName = (p, extra = []) => (names) => names.map((x) => p.kids.find((n) => n.name === x) || extra.find((n) => n.name === x) || node(x));

test("one row moved to the top moves that row alone", () => {
  const names = Array.from({ length: 100 }, (_, i) => `r${i}`);
  const p = new Parent(names);
  placeChildren(p, byName(p)(["r99", ...names.slice(0, 99)]));
  assert.deepEqual(p.names(), ["r99", ...names.slice(0, 99)]);
  assert.equal(p.moves, 1);
});

test("the top row moved to the bottom moves that row alone", () => {
  const names = Array.from({ length: 100 }, (_, i) => `r${i}`);
  const p = new Parent(names);
  placeChildren(p, byName(p)([...names.slice(1), "r0"]));
  assert.deepEqual(p.names(), [...names.slice(1), "r0"]);
  assert.equal(p.moves, 1);
});

test("an unchanged list is not touched", () => {
  const p = new Parent(["a", "b", "c"]);
  placeChildren(p, byName(p)(["a", "b", "c"]));
  assert.equal(p.moves, 0);
});

test("rows that left are removed, new ones put in their places, the others kept", () => {
  const p = new Parent(["a", "b", "c", "d", "e"]);
  const kept = p.kids.filter((n) => ["a", "c", "e"].includes(n.name));
  placeChildren(p, byName(p)(["x", "a", "c", "y", "e", "z"]));
  assert.deepEqual(p.names(), ["x", "a", "c", "y", "e", "z"]);
  assert.ok(kept.every((n) => p.kids.includes(n))); // the same nodes, not copies
  assert.equal(p.moves, 2 + 3); // b and d removed; x, y and z put in
});

test("any order is reached, from any order", () => {
  let seed = 7;
  const random = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  for (let round = 0; round < 300; round++) {
    const before = Array.from({ length: Math.floor(random() * 12) }, (_, i) => `n${i}`);
    const p = new Parent(before);
    const pool = [...before, "new1", "new2", "new3"].filter(() => random() < 0.7);
    const after = pool.sort(() => random() - 0.5);
    placeChildren(p, byName(p)(after));
    assert.deepEqual(p.names(), after);
  }
});

test("a reversed list keeps one row in place", () => {
  const p = new Parent(["a", "b", "c", "d"]);
  placeChildren(p, byName(p)(["d", "c", "b", "a"]));
  assert.deepEqual(p.names(), ["d", "c", "b", "a"]);
  assert.equal(p.moves, 3);
});

test("a few moves at a time put the top rows in place first, and later calls finish the order", () => {
  const names = Array.from({ length: 10 }, (_, i) => `r${i}`);
  const p = new Parent(names);
  const wanted = ["r9", "r8", "r7", "new", ...names.slice(0, 7)];
  const nodes = byName(p)(wanted);
  assert.equal(placeChildren(p, nodes, 2), false);
  assert.deepEqual(p.names().slice(0, 2), ["r9", "r8"]); // the top first
  assert.equal(new Set(p.names()).size, 11); // every row shown once, the new one included
  let calls = 1;
  while (!placeChildren(p, nodes, 2)) calls++;
  assert.deepEqual(p.names(), wanted);
  assert.ok(calls <= 3);
});
