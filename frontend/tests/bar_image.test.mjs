// A progress bar's segments as one gradient (frontend/js/bar_image.js).
import { test } from "node:test";
import assert from "node:assert/strict";
import { barImage } from "../js/bar_image.js";

test("each segment is as wide as its share, in order, from the start to the end", () => {
  assert.equal(barImage([[3, "green"], [1, "blue"]]), "linear-gradient(to right, var(--green) 0% 75%, var(--blue) 75% 100%)");
  assert.equal(barImage([[1, "green"], [1, "amber"], [1, "red"]]),
    "linear-gradient(to right, var(--green) 0% 33.33%, var(--amber) 33.33% 66.67%, var(--red) 66.67% 100%)");
});

test("a status that counts none takes no room, and none at all is no gradient", () => {
  assert.equal(barImage([[0, "green"], [2, "amber"]]), "linear-gradient(to right, var(--amber) 0% 100%)");
  assert.equal(barImage([]), "none");
  assert.equal(barImage([[0, "green"]]), "none");
});
