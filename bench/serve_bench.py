"""``relayflow serve`` under concurrent clients: how long a run start takes to be answered.

Each of 1, 4 and 16 clients (threads, each with its own HTTP connection) starts runs of a
one-step workflow (``POST /workflows/{id}/runs``) back to back, ``STARTS_PER_CLIENT`` each,
against one LocalServer; the latency of every start is measured from sending the request
to its 201. Printed: p50 and p95 latency, and starts per second over the whole round.

A second measurement holds one slow request open (a workflow PUT whose control-plane call
waits on an event) and times a GET of another workflow meanwhile: the GET's latency is that
of an idle server, as requests no longer wait for each other.

Every figure is wall time (``time.perf_counter``) except ``starts/s``, a rate over the round's
wall time; none is CPU time. Figures are for this machine only. Run: ``make bench`` or
``.venv/bin/python bench/serve_bench.py``.
"""

from __future__ import annotations

import statistics
import threading
import time
from typing import Any

import httpx

from relayflow.local.serve import LocalServer

CLIENTS = (1, 4, 16)
#: Seconds any request may take. The first ``PUT /workflows`` compiles and creates the state
#: machine, and took over httpx's default 5 s on a loaded 2-core machine (``ReadTimeout``
#: stopped ``make bench``); the bound only ends a request that hangs.
HTTP_TIMEOUT = 120.0
STARTS_PER_CLIENT = 12
WORKFLOW = {
    "id": "bench",
    "start": "mark",
    "steps": {"mark": {"type": "transform", "mapping": {"ok": True}}},
}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def round_of(server: LocalServer, clients: int) -> tuple[list[float], float]:
    """Latencies (ms) of every start, and the round's wall time (s)."""
    latencies: list[float] = []
    lock = threading.Lock()
    barrier = threading.Barrier(clients)
    headers = {"X-Api-Key": server.bootstrap_key}

    def client() -> None:
        with httpx.Client(base_url=server.url, headers=headers, timeout=HTTP_TIMEOUT) as http:
            barrier.wait()
            for _ in range(STARTS_PER_CLIENT):
                sent = time.perf_counter()
                response = http.post("/workflows/bench/runs", json={"input": {}})
                elapsed = (time.perf_counter() - sent) * 1000
                assert response.status_code == 201, response.text
                with lock:
                    latencies.append(elapsed)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return latencies, time.perf_counter() - started


def held_request_get(server: LocalServer) -> float:
    """Milliseconds a GET takes while another request is held open in the control plane."""
    from relayflow.control.service import ControlPlane

    entered, release = threading.Event(), threading.Event()
    original = ControlPlane.get_workflow

    def held(self: ControlPlane, tenant: str, workflow_id: str) -> Any:
        if workflow_id == "held":
            entered.set()
            release.wait(60)
        return original(self, tenant, workflow_id)

    headers = {"X-Api-Key": server.bootstrap_key}
    with httpx.Client(base_url=server.url, headers=headers, timeout=HTTP_TIMEOUT) as http:
        http.put("/workflows/held", json={**WORKFLOW, "id": "held"})
        ControlPlane.get_workflow = held  # type: ignore[method-assign]
        try:
            slow = threading.Thread(target=lambda: http.get("/workflows/held"))
            slow.start()
            entered.wait(60)
            sent = time.perf_counter()
            assert http.get("/workflows/bench").status_code == 200
            elapsed = (time.perf_counter() - sent) * 1000
            release.set()
            slow.join()
        finally:
            ControlPlane.get_workflow = original  # type: ignore[method-assign]
    return elapsed


def main() -> None:
    with LocalServer(time_scale=0.001) as server:
        server.set_rate_limit(per_second=10_000, burst=100_000)
        headers = {"X-Api-Key": server.bootstrap_key}
        with httpx.Client(base_url=server.url, headers=headers, timeout=HTTP_TIMEOUT) as c:
            put = c.put("/workflows/bench", json=WORKFLOW)
            assert put.status_code in (200, 201), put.text
        round_of(server, 2)  # warm up: functions loaded, state machine cached
        print(f"run starts, {STARTS_PER_CLIENT} per client (POST /workflows/bench/runs)")
        print("figures: p50/p95 = wall ms per start; starts/s = starts per wall second")
        print(f"{'clients':>8} {'p50 wall ms':>12} {'p95 wall ms':>12} {'starts/s':>9}")
        for clients in CLIENTS:
            latencies, wall = round_of(server, clients)
            print(
                f"{clients:>8} {statistics.median(latencies):>12.1f} "
                f"{percentile(latencies, 0.95):>12.1f} {len(latencies) / wall:>9.1f}"
            )
        held = held_request_get(server)
        print(f"GET while another request is held open: {held:.1f} ms (wall)")


if __name__ == "__main__":
    main()
