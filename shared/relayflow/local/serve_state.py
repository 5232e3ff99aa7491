"""``relayflow serve --state DIR``: the server's side of :mod:`relayflow.local.state_dir`.

On open the saved state is restored into the fresh runtime before the server answers, the
runs that were under way go on (:mod:`relayflow.local.revive`), and the bootstrap key and
admin token printed last time work again. While the server runs, the state is saved every
``interval`` seconds (a crash loses at most that much); on close, once the recorder has
reported every run end, it is saved a last time, before the runtime stops.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from relayflow.local.revive import Revived, revive_runs
from relayflow.local.state_dir import (
    CaptureCache,
    StateDir,
    StateDirError,
    capture,
    encoded,
    restore,
)

#: Seconds between saves while the server runs.
DEFAULT_SAVE_INTERVAL = 2.0


class KeptState:
    """The state directory of one server (see the module docstring)."""

    def __init__(self, path: Path | str, *, interval: float = DEFAULT_SAVE_INTERVAL) -> None:
        self.dir = StateDir(path)
        self.interval = interval
        #: The server facts of the last save (``bootstrap_key``, ``admin_token``), if any.
        self.saved_server: dict[str, Any] = {}
        #: What the restart did with the runs under way (set by :meth:`revive`).
        self.revived = Revived()
        self._snapshot: dict[str, Any] | None = None
        self._cache = CaptureCache()
        self._archived: dict[str, Any] = {}
        self._runtime: Any = None
        self._server: Callable[[], dict[str, Any]] = dict
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def describe(self) -> str:
        """What ``GET /`` and the banner say about the state."""
        return f"kept in {self.dir.path} (saved every {self.interval:g}s and on stop)"

    def restore(self, runtime: Any) -> None:
        """Put the last save (if there is one) into ``runtime``."""
        self.dir.open()
        self._snapshot = self.dir.load()
        if self._snapshot is None:
            return
        self.saved_server = dict(self._snapshot.get("server") or {})
        try:
            self._archived = restore(runtime, self._snapshot)
        except Exception as exc:
            raise StateDirError(
                f"{self.dir.file} could not be restored ({type(exc).__name__}: {exc}); move "
                "it away to start afresh"
            ) from exc

    @property
    def restored(self) -> bool:
        """Whether a save was found and put into the runtime (a failed restore raises)."""
        return self._snapshot is not None

    def counts(self) -> dict[str, int]:
        """How much the restore brought back (for the banner)."""
        if self._snapshot is None:
            return {}
        items = [item for table in self._snapshot["dynamodb"] for item in table["items"]]
        kinds = [str(item.get("type", {}).get("S", "")) for item in items]
        return {
            "items": len(items),
            "workflows": sum(1 for kind in kinds if kind == "workflow"),
            "runs": sum(1 for kind in kinds if kind == "run"),
            "executions": len(self._archived),
        }

    def revive(self, runtime: Any, report: Callable[[Mapping[str, Any]], Any]) -> Revived:
        """Carry on (or fail) the runs that were under way at the last save."""
        if self._snapshot is not None:
            self.revived = revive_runs(runtime, self._archived, self._snapshot["dynamodb"], report)
            # What was kept of the ended executions is saved as it was read, not read again.
            for arn, kept in self._archived.items():
                if kept.cut is None and kept.description.get("status") != "RUNNING":
                    entry = {
                        "description": kept.description,
                        "events": kept.events,
                        "machine": kept.machine,
                    }
                    self._cache.ended[arn] = json.dumps(encoded(entry), separators=(",", ":"))
        return self.revived

    def start(self, runtime: Any, server: Callable[[], dict[str, Any]]) -> None:
        """Save every :attr:`interval` seconds from now on."""
        self._runtime, self._server = runtime, server
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="relayflow-state", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.save()
            except Exception as exc:  # the next interval saves again
                from relayflow.observability import logger

                logger.warning("saving the state failed", extra={"reason": str(exc)})

    def stop(self) -> None:
        """Stop the periodic saves (the last save is the caller's :meth:`save`)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None

    def save(self) -> None:
        """Save what the runtime holds now."""
        if self._runtime is None:
            return
        with self._lock:
            self.dir.save(capture(self._runtime, self._server(), self._cache))
