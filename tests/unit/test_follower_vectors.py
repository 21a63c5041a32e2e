"""The client side of the resume protocol against the vectors the browser runs too (frontend/vectors/follower.json):
gateway/core/follower.py here, frontend/js/live.js's `follow` under Node.js."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from gateway.core.follower import Follower, Verdict

ROOT = Path(__file__).resolve().parents[2]
VECTORS_PATH = ROOT / "frontend" / "vectors" / "follower.json"
VECTORS: dict[str, Any] = json.loads(VECTORS_PATH.read_text())
CHANNEL: str = VECTORS["channel"]


def feed(follower: Follower, m: dict[str, Any]) -> Verdict:
    """A decoded server message to the follower, as each client dispatches it."""
    if m["type"] == "resync":
        return follower.resync(m["channel"])
    if m["type"] == "snapshot":
        return follower.snapshot(m["channel"], m["seq"], m["cursor"], m["page"], m["final"])
    return follower.message(m["channel"], m["seq"], m["cursor"])


def run_python(case: dict[str, Any]) -> list[dict[str, Any]]:
    follower = Follower()
    follower.follow(CHANNEL)
    seen = []
    for step in case["steps"]:
        verdict = None
        if step.get("reload"):
            follower.reload(CHANNEL)
        else:
            verdict = feed(follower, step["message"]).value
        at = follower.channels[CHANNEL]
        position = {
            "seq": at.seq,
            "cursor": at.cursor,
            "ready": at.ready,
            "next_page": at.next_page,
            "resume": at.resume_cursor,
        }
        seen.append({"verdict": verdict, "position": position})
    return seen


def expected(case: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"verdict": step.get("verdict"), "position": step["position"]} for step in case["steps"]]


# The same walk in the browser's code: every case's verdicts and positions, as JSON on stdout.
NODE_SCRIPT = """
import { readFileSync } from "node:fs";
import { follow, reset, resumeCursor } from "%(live)s";
const v = JSON.parse(readFileSync(%(vectors)s, "utf8"));
const out = v.cases.map((c) => {
  const sub = { handler: null, cursor: null, seq: null, ready: false, nextPage: null };
  return c.steps.map((step) => {
    let verdict = null;
    if (step.reload) reset(sub);
    else verdict = step.message.channel === v.channel ? follow(sub, step.message) : "unfollowed";
    return { verdict, position: { seq: sub.seq, cursor: sub.cursor, ready: sub.ready, next_page: sub.nextPage, resume: resumeCursor(sub) } };
  });
});
console.log(JSON.stringify(out));
"""


@pytest.mark.parametrize("case", VECTORS["cases"], ids=lambda c: c["name"])
def test_the_follower_passes_the_vectors(case: dict[str, Any]) -> None:
    assert run_python(case) == expected(case)


def test_the_browser_follows_channels_as_the_vectors_say() -> None:
    if shutil.which("node") is None:
        if os.environ.get("GATEWAY_REQUIRE_NODE") == "1":
            pytest.fail("Node.js is required (GATEWAY_REQUIRE_NODE=1) to run frontend/js/live.js against the vectors")
        pytest.skip("Node.js is not installed: frontend/js/live.js not run here")
    script = NODE_SCRIPT % {
        "live": (ROOT / "frontend" / "js" / "live.js").as_uri(),
        "vectors": json.dumps(str(VECTORS_PATH)),
    }
    done = subprocess.run(
        ["node", "--input-type=module", "-e", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    browser = json.loads(done.stdout)
    assert len(browser) == len(VECTORS["cases"])
    for case, seen in zip(VECTORS["cases"], browser, strict=True):
        assert seen == expected(case), case["name"]
