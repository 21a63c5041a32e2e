"""An action's outcome follows the truth wherever the cluster's reports land: Retry Sync on a cluster that never
confirms (its submissions' rows on the team channel tell), and an action on more trajectories than an outcome
follows (what it cannot follow is counted, never left at the first words)."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import asyncpg

from gateway.sim.cluster import SimCluster
from tests.browser.test_jobs_view import clusters  # noqa: F401  (gpu-1 confirms, gpu-2 never does)
from tests.conftest import Stack
from tests.integration.conftest import Team

SAYS_AT_LAST = """([text, level]) => {
    const el = document.querySelector("#toasts .toast[data-seen='first words']");
    return el && el.classList.contains(level) && new RegExp(text).test(el.querySelector('.words').textContent);
}"""


async def until(condition: Any, deadline: float = 30.0) -> None:
    """Wait for a condition of the test's own process (a simulated cluster's state), with a generous deadline."""
    async with asyncio.timeout(deadline):
        while not condition():
            await asyncio.sleep(0.02)


async def test_retry_sync_on_a_cluster_that_never_confirms_follows_its_reports_in_place(
    page: Any,
    stack: Stack,
    pool: asyncpg.Pool,
    team: Team,
    clusters: tuple[SimCluster, SimCluster],  # noqa: F811
) -> None:
    """gpu-2 resumes the sync but never confirms, and says so only in its staging report, later than the gateway
    waits: the toast says at once that its part is not confirmed yet, then the same toast says the sync is
    retried, confirmed by its reports (it stayed at its first words)."""
    _, gpu2 = clusters
    gpu2.operator_delay = (3600.0, 3600.0)  # nobody but the person retries it here
    sid = await gpu2.create_submission(title="Upload of a failed sync", staging="sync_failed")
    late = asyncio.Event()

    async def resumes() -> None:  # the simulated cluster's own path (gateway.sim.workloads.stage)
        await gpu2.sync_retried(sid)
        await late.wait()
        await gpu2.update_submission(sid, staging="syncing")

    staging = asyncio.create_task(resumes())
    try:
        await until(lambda: sid in gpu2.sync_failed)
        await page.goto(f"{stack.nodes[0].http}/submissions")
        await page.click(f"tr[data-sub='{sid}']", button="right")
        await page.click(".menu li:text-is('Retry Sync')")
        toast = page.locator(".toast.warning", has_text="Retrying sync of 1 submission(s) on gpu-2: not confirmed yet")
        await toast.wait_for()
        await toast.evaluate("el => { el.dataset.seen = 'first words' }")  # the same element must say the truth
        assert sid not in gpu2.sync_failed  # it did resume it: only its report is late
        late.set()
        await page.wait_for_function(
            SAYS_AT_LAST,
            arg=[r"^Retrying sync of 1 submission\(s\); gpu-2 confirmed by its reports after \d+ s$", "success"],
            timeout=30_000,
        )
        assert await page.locator("#toasts .toast").count() == 1
        await staging
    finally:
        staging.cancel()


async def test_an_action_on_more_trajectories_than_it_follows_counts_the_rest(
    page: Any,
    stack: Stack,
    pool: asyncpg.Pool,
    team: Team,
    clusters: tuple[SimCluster, SimCluster],  # noqa: F811
) -> None:
    """Kill on a submission whose 22 tasks lie on 22 trajectories, on gpu-2 that never confirms: the toast follows
    the 20 trajectories it can and says the 2 others in a count, in place of "Killing 22 task(s) ...: not confirmed
    yet" for ever."""
    _, gpu2 = clusters
    trajectories = [await gpu2.create_trajectory(f"Sweep {i:02d}") for i in range(22)]
    sid = await gpu2.create_submission(title="A sweep over 22 trajectories", staging="ready")
    tasks = await gpu2.submit(
        [{"trajectory_id": t, "kind": "analysis", "name": "a", "frame": 0, "submission_id": sid} for t in trajectories]
    )
    await gpu2.flushed()
    held: list[dict[str, Any]] = []
    report = gpu2.ingest.report
    gpu2.ingest.report = held.append  # type: ignore[method-assign]  # its reports wait until the test lets them go
    await page.goto(f"{stack.nodes[0].http}/submissions")
    # As a person would, act once the row shows its tasks (the window read first may hold the row as created).
    await page.locator(f"tr[data-sub='{sid}']", has_text="0/22 done").wait_for()
    await page.click(f"tr[data-sub='{sid}']", button="right")
    await page.click(".menu li:text-is('Kill')")
    await page.locator("dialog h2", has_text="on gpu-2?").wait_for()
    await page.click("dialog[open] button[type='submit']")
    killing = page.locator(".toast.warning", has_text="Killing 22 task(s) on gpu-2: not confirmed yet")
    await killing.wait_for()
    await killing.evaluate("el => { el.dataset.seen = 'first words' }")
    assert len(held) == len(tasks)  # it did kill them all: only its reports are late
    for r in held:
        report(r)
    await page.wait_for_function(
        SAYS_AT_LAST,
        arg=[r"^Killed 20 of 22 task\(s\); 2 more on gpu-2 not followed here$", "warning"],
        timeout=30_000,
    )
    assert not re.search(r"\b0 of", await page.inner_text("#toasts"))  # never a count of zero for work done
