"""Headless Chromium for browser tests, driven over the DevTools protocol through
``--remote-debugging-pipe`` (file descriptors 3 and 4, NUL-separated JSON): no driver binary,
no Python package and nothing downloaded, so it only depends on the browser the system
package installs (``make browser``). Under ``make test`` (``RELAYFLOW_REQUIRE_CHROMIUM=1``) and
in CI (``CI=true``) a missing Chromium fails the test; elsewhere it is skipped with the reason.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = os.environ.get("RELAYFLOW_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--no-default-browser-check",
    "--remote-debugging-pipe",
)
TIMEOUT = 30.0


def require_chromium() -> str:
    found = CHROMIUM if os.access(CHROMIUM, os.X_OK) else shutil.which("chromium")
    if found:
        return found
    reason = f"{CHROMIUM} is missing: run `make browser` (apt-get install chromium)"
    if os.environ.get("CI") == "true" or os.environ.get("RELAYFLOW_REQUIRE_CHROMIUM") == "1":
        pytest.fail(reason)
    pytest.skip(reason)


class CdpError(RuntimeError):
    pass


def _high_pipe() -> tuple[int, int]:
    """A pipe whose ends are above 9, so moving them onto fds 3 and 4 cannot clobber them."""
    ends = []
    for fd in os.pipe():
        ends.append(fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10))
        os.close(fd)
    return ends[0], ends[1]


class Browser:
    """Headless Chromium and one page, over the DevTools pipe."""

    def __init__(self, binary: str, profile: Path) -> None:
        commands_read, self._commands = _high_pipe()
        self._replies, replies_write = _high_pipe()
        # bash (dash takes one-digit fds only) moves the pipe ends onto fds 3 (commands in)
        # and 4 (replies out), then execs Chromium.
        script = (
            f'exec "$0" "$@" 3<&{commands_read} 4>&{replies_write} '
            f"{commands_read}<&- {replies_write}>&-"
        )
        self.process = subprocess.Popen(
            ["/bin/bash", "-c", script, binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}"],
            pass_fds=(commands_read, replies_write),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(commands_read)
        os.close(replies_write)
        self._buffer = b""
        self._next_id = 0
        self._events: list[dict[str, Any]] = []
        self.session: str | None = None
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        attached = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})
        self.session = attached["sessionId"]
        self.call("Page.enable")

    # -- protocol ----------------------------------------------------------------------------

    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise CdpError("Chromium did not answer in time")
            ready, _, _ = select.select([self._replies], [], [], left)
            if ready:
                chunk = os.read(self._replies, 65536)
                if not chunk:
                    raise CdpError(f"Chromium closed the pipe (exit {self.process.poll()})")
                self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self._next_id += 1
        request: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if self.session and not method.startswith("Target."):
            request["sessionId"] = self.session
        os.write(self._commands, json.dumps(request).encode() + b"\0")
        deadline = time.monotonic() + TIMEOUT
        while True:
            message = self._read_message(deadline)
            if message.get("id") == self._next_id:
                if "error" in message:
                    raise CdpError(f"{method}: {message['error']}")
                return message.get("result") or {}
            if "method" in message:
                self._events.append(message)

    def wait_event(self, method: str) -> dict[str, Any]:
        deadline = time.monotonic() + TIMEOUT
        while True:
            for index, event in enumerate(self._events):
                if event["method"] == method:
                    return self._events.pop(index)
            message = self._read_message(deadline)
            if "method" in message:
                self._events.append(message)

    # -- page --------------------------------------------------------------------------------

    def open(self, url: str) -> None:
        self._events.clear()
        navigated = self.call("Page.navigate", {"url": url})
        if navigated.get("errorText"):
            raise CdpError(f"navigation failed: {navigated['errorText']}")
        self.wait_event("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in result:
            raise CdpError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def text(self, selector: str) -> str | None:
        return self.evaluate(
            f"(e => e ? e.textContent : null)(document.querySelector({json.dumps(selector)}))"
        )

    def type_into(self, selector: str, text: str) -> None:
        """Focus the field and type, as a keyboard would."""
        self.evaluate(f"document.querySelector({json.dumps(selector)}).focus()")
        self.call("Input.insertText", {"text": text})

    def click(self, selector: str) -> None:
        """A real mouse click in the middle of the element."""
        box = self.evaluate(
            f"(r => [r.x + r.width / 2, r.y + r.height / 2])"
            f"(document.querySelector({json.dumps(selector)}).getBoundingClientRect())"
        )
        x, y = box
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.call(
                "Input.dispatchMouseEvent",
                {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1},
            )

    def wait_for(self, selector: str) -> str:
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            found = self.text(selector)
            if found is not None:
                return found
            time.sleep(0.05)
        raise CdpError(f"{selector} never appeared; page: {self.text('body')!r}")

    def screenshot(self, path: Path) -> None:
        data = self.call("Page.captureScreenshot", {"format": "png"})["data"]
        path.write_bytes(base64.b64decode(data))

    def close(self) -> None:
        with contextlib.suppress(CdpError):
            self.call("Browser.close")
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
        os.close(self._commands)
        os.close(self._replies)
