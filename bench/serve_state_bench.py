"""``relayflow serve --state DIR``: what keeping the state costs, by the number of runs kept.

For each size, one server runs that many finished runs (a two-step workflow) and, kept
waiting, one parked run per ten; then the figures:

* ``save``: one save of the whole state (what the server does every 2 s and on stop), its
  time and the file's size; a second save, where the ended executions are read from the
  cache (``kept``), shows the steady cost;
* ``open``: the time to open a server on that directory (restore, revival of the parked runs)
  against opening one with no state, in the same process: the ratio is what a restart adds;
  then the first save after that restart (the kept executions are not read again).

Run: ``.venv/bin/python bench/serve_state_bench.py [--sizes 0 100 400]``. Figures are for
comparison inside one run (this machine is noisy); nothing is asserted.
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from relayflow.local.serve import LocalServer

WORKFLOW = {
    "id": "bench-state",
    "start": "shape",
    "steps": {
        "shape": {"type": "transform", "mapping": {"n": "{{ trigger.n }}"}, "on_success": "done"},
        "done": {"type": "noop"},
    },
}
PARKING = {
    "id": "bench-park",
    "start": "call",
    "steps": {
        "call": {
            "type": "webhook_out",
            "url": "http://127.0.0.1:9/x",  # refused by the SSRF guard: the run parks
            "on_error": {"action": "park"},
        }
    },
}


def _wait(api: httpx.Client, run_ids: list[str], status: str) -> None:
    pending = set(run_ids)
    while pending:
        for run_id in list(pending):
            if api.get(f"/runs/{run_id}").json()["status"] == status:
                pending.discard(run_id)
        time.sleep(0.05)


def fill(state: Path, runs: int) -> None:
    """A server on ``state`` with ``runs`` finished runs and ``runs // 10`` parked ones."""
    with LocalServer(state_dir=state, save_interval=3600) as server:
        api = httpx.Client(
            base_url=server.url, headers={"X-Api-Key": server.bootstrap_key}, timeout=60
        )
        api.put("/workflows/bench-state", json=WORKFLOW)
        api.put("/workflows/bench-park", json=PARKING)
        done = [
            api.post("/workflows/bench-state/runs", json={"input": {"n": n}}).json()["run_id"]
            for n in range(runs)
        ]
        parked = [
            api.post("/workflows/bench-park/runs", json={"input": {}}).json()["run_id"]
            for _ in range(runs // 10)
        ]
        _wait(api, done, "succeeded")
        _wait(api, parked, "parked")
        assert server.state is not None
        for label in ("first save", "second save"):
            started = time.perf_counter()
            server.state.save()
            took = time.perf_counter() - started
            size = server.state.dir.file.stat().st_size / 1024
            print(f"  {label:<12} {took * 1000:8.1f} ms   file {size:9.1f} KB")


def timed_open(state: Path | None) -> tuple[float, Any, float]:
    """Seconds to open a server (on ``state``), what it revived, and its first save's time."""
    started = time.perf_counter()
    server = LocalServer(state_dir=state, save_interval=3600).__enter__()
    took = time.perf_counter() - started
    revived, saved = None, 0.0
    if server.state is not None:
        revived = server.state.revived
        started = time.perf_counter()
        server.state.save()
        saved = time.perf_counter() - started
    server.__exit__(None, None, None)
    return took, revived, saved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[0, 100, 400])
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    print("serve --state: save and restart, by runs kept")
    for runs in args.sizes:
        with tempfile.TemporaryDirectory() as folder:
            state = Path(folder) / "state"
            print(f"{runs} finished run(s), {runs // 10} parked")
            fill(state, runs)
            plain, _, _ = timed_open(None)
            kept, revived, saved = timed_open(state)
            print(
                f"  open         {kept * 1000:8.1f} ms with the state, {plain * 1000:.1f} ms "
                f"without: {kept / plain:.2f}x ({len(revived.revived)} run(s) revived)"
            )
            print(f"  save after   {saved * 1000:8.1f} ms (the first save after the restart)")


if __name__ == "__main__":
    main()
