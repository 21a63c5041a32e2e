"""A simulated cluster's requests to the gateway's ingest API, and its job reports sent in batches.

A request once sent finishes even if its caller is cancelled: cut off half-way, the gateway would only see a
client vanish mid-request. Reports go out as a cluster daemon sends them, one request every `REPORT_EVERY` at
most; a batch the gateway could not take now is sent again after a pause, one it refused is dropped.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import httpx

log = logging.getLogger(__name__)

REPORT_EVERY = 0.1  # real seconds: a cluster daemon's batching cadence, at most 10 requests a second
STOP_REQUESTS_WITHIN = 5.0  # real seconds aclose() lets requests already sent finish


class IngestClient:
    def __init__(self, gateway_url: str, key: str, cluster_id: int) -> None:
        self.cluster_id = cluster_id
        self.http = httpx.AsyncClient(base_url=gateway_url, headers={"Authorization": f"Bearer {key}"}, timeout=30)
        self._requests: set[asyncio.Future[httpx.Response]] = set()
        self._reports: list[dict[str, Any]] = []
        self._reported = 0  # reports made so far...
        self._sent = 0  # ...and handed to the gateway (in order: a failed batch goes back to the front)
        self._progress = asyncio.Event()

    async def post(self, path: str, body: Any) -> httpx.Response:
        """POST to the gateway; aclose() waits for it even when the caller is cancelled."""
        request = asyncio.ensure_future(self.http.post(path, json=body))
        self._requests.add(request)
        request.add_done_callback(self._requests.discard)
        return await asyncio.shield(request)

    def report(self, report: dict[str, Any]) -> None:
        """A job's new state, sent with the next batch."""
        self._reports.append(report)
        self._reported += 1

    async def send_reports(self) -> None:
        """Send the reports in batches until cancelled."""
        failing = False
        while True:
            await asyncio.sleep(REPORT_EVERY)
            if not self._reports:
                continue
            batch, self._reports = self._reports, []
            try:
                response = await self.post("/api/ingest/jobs", {"jobs": batch})
                problem = None if response.status_code < 400 else f"HTTP {response.status_code}"
            except httpx.HTTPError as exc:
                response, problem = None, describe_failure(exc)
            if problem is not None and (response is None or response.status_code == 429 or response.status_code >= 500):
                if not failing:
                    log.warning("cluster %d: reports not delivered (%s); retrying", self.cluster_id, problem)
                failing = True
                self._reports[:0] = batch
                await asyncio.sleep(_retry_after(response))
                continue
            if failing:
                log.warning("cluster %d: reports delivered again", self.cluster_id)
                failing = False
            if problem is not None and response is not None:
                log.warning("cluster %d: reports refused (%s): %s", self.cluster_id, problem, response.text[:200])
            self._sent += len(batch)
            self._progress.set()

    async def flushed(self) -> None:
        """Wait until every report so far has been handed to the gateway."""
        target = self._reported
        while self._sent < target:
            self._progress.clear()
            await self._progress.wait()

    async def aclose(self) -> None:
        """Let the requests already sent finish (within STOP_REQUESTS_WITHIN), then close the connections."""
        if self._requests:
            _, late = await asyncio.wait(self._requests, timeout=STOP_REQUESTS_WITHIN)
            for request in late:
                request.cancel()
            await asyncio.gather(*self._requests, return_exceptions=True)
        await self.http.aclose()


def describe_failure(exc: httpx.HTTPError) -> str:
    """One line for a failed request: its kind, and the status when the gateway answered."""
    if isinstance(exc, httpx.HTTPStatusError):
        return f"HTTP {exc.response.status_code} from {exc.request.url.path}"
    return type(exc).__name__


def _retry_after(response: httpx.Response | None) -> float:
    """How long to wait before sending again: what a 429 says (Retry-After), else a second."""
    try:
        return min(30.0, float(response.headers.get("retry-after", 1))) if response is not None else 1.0
    except ValueError:
        return 1.0
