"""What a tenant may see of an error's cause: its name and message, never the server's code.

Step Functions puts the body of a failed Lambda invocation into the ``Cause`` of the Task's
error: ``{"errorMessage", "errorType", "requestId", "stackTrace"}``, where ``stackTrace`` lists
the frames of the engine (``/var/task/app.py``, ``/opt/python/relayflow/…``). The run's
``cause``, its step timeline, its DLQ entry and its failure notifications are what a tenant
reads, so every cause passes through :func:`public_cause` before it is stored or shown:

* a Lambda error body keeps ``errorType`` and ``errorMessage`` (as compact JSON, the shape
  readers already parse), and ``details`` when a Relayflow error reported some
  (:meth:`relayflow.errors.RelayflowError.reported`); the stack trace and the request id
  are dropped;
* a sub_workflow failure (``{"child_run_id", "status", "error", "cause"}``) keeps its shape,
  with the child's cause made public the same way;
* in any text, a Python traceback is cut to its last line (the exception), ``File "…"``
  frame lines are dropped, and paths under the server's own directories are replaced by
  :data:`SERVER_PATH`.

A code step's message names the frames of the user's own code (``relayflow.sandbox``), which
are not server frames and are kept. The full trace of every step failure is in the step
function's log line ``step failed``, with the run id, workflow id, step key and attempt
(:func:`relayflow.observability.step_handler`).
"""

from __future__ import annotations

import functools
import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from relayflow.errors import split_details

#: The error of a run that ran past its ``run_timeout_seconds`` (Step Functions' name), for
#: runs whose execution reports none.
RUN_TIMEOUT_ERROR = "States.Timeout"
#: What a waiting step type waits for, as a timeout's cause names it.
_WAITS_FOR = {
    "approval": "a decision",
    "waitpoint": "a completion",
    "wait_for_event": "a matching event",
}
#: What a path of the server's own files becomes in a public cause.
SERVER_PATH = "<server path>"
#: Longest public cause kept, in characters (a message can be long; a cause is for a person).
MAX_CAUSE_CHARS = 8192
_TRACEBACK_HEAD = "Traceback (most recent call last):"
_FRAME_LINE = re.compile(r'^\s*File "[^"]*", line \d+.*$\n?(?:^ {4,}\S.*$\n?)?', re.MULTILINE)
#: Directories whose files are the server's: the Lambda task and layer roots, the runtime,
#: and (locally) the interpreter, the checkout and the temporary directory.
_FIXED_ROOTS = ("/var/task", "/var/runtime", "/var/lang", "/opt/python", "/opt/")


@functools.lru_cache(maxsize=1)
def _server_roots() -> tuple[str, ...]:
    package = Path(__file__).resolve().parent
    roots = {
        *_FIXED_ROOTS,
        str(package.parent),
        str(package.parents[1]),
        sys.prefix,
        sys.base_prefix,
        sys.exec_prefix,
        tempfile.gettempdir(),
        os.path.expanduser("~"),
    }
    roots = {root.rstrip("/") for root in roots if root and root not in ("/", "~")}
    # Longest first, so a checkout inside the home directory is replaced as a whole.
    return tuple(sorted(roots, key=len, reverse=True))


@functools.lru_cache(maxsize=1)
def _server_path_pattern() -> re.Pattern[str]:
    alternatives = "|".join(re.escape(root) for root in _server_roots())
    # A root counts only as a whole path: /opt/x, but not /options nor https://h/opt/x.
    return re.compile(rf"(?<![\w.:/-])(?:{alternatives})(?![\w.-])(?:/[^\s\"'<>:,;)\]]*)?")


def public_text(text: str) -> str:
    """``text`` without Python tracebacks, frame lines or paths of the server's files."""
    if _TRACEBACK_HEAD in text:
        lines = [line for line in text.split(_TRACEBACK_HEAD, 1)[1].splitlines() if line.strip()]
        head = text.split(_TRACEBACK_HEAD, 1)[0].rstrip()
        last = lines[-1].strip() if lines else ""
        text = f"{head}\n{last}".strip() if head else last
    text = _FRAME_LINE.sub("", text)
    return _server_path_pattern().sub(SERVER_PATH, text)


def _public_value(value: Any) -> Any:
    if isinstance(value, str):
        return public_text(value)
    if isinstance(value, dict):
        return {k: _public_value(v) for k, v in value.items() if k != "stackTrace"}
    if isinstance(value, list):
        return [_public_value(v) for v in value]
    return value


def public_cause(cause: str | None) -> str | None:
    """The part of an error's ``cause`` a tenant may see (see the module docstring);
    ``None`` stays ``None``."""
    if cause is None:
        return None
    try:
        parsed = json.loads(cause)
    except (ValueError, RecursionError):
        return public_text(cause)[:MAX_CAUSE_CHARS]
    if _is_lambda_error(parsed):
        body: dict[str, Any] = {}
        if parsed.get("errorType") is not None:
            body["errorType"] = public_text(str(parsed["errorType"]))
        details = parsed.get("details") if isinstance(parsed.get("details"), dict) else None
        if parsed.get("errorMessage") is not None:
            message, reported = split_details(str(parsed["errorMessage"]))
            body["errorMessage"] = public_text(message)
            details = reported or details
        if details:  # (a cause made public before keeps its details: this is idempotent)
            body["details"] = _public_value(details)
        return json.dumps(body, separators=(",", ":"), ensure_ascii=False)[:MAX_CAUSE_CHARS]
    if isinstance(parsed, dict) and "child_run_id" in parsed:
        child = dict(parsed)
        if isinstance(child.get("cause"), str):
            child["cause"] = public_cause(child["cause"])
        return json.dumps(_public_value(child), separators=(",", ":"), ensure_ascii=False)
    if isinstance(parsed, dict | list):
        return json.dumps(_public_value(parsed), separators=(",", ":"), ensure_ascii=False)
    return public_text(cause)[:MAX_CAUSE_CHARS]


def _is_lambda_error(parsed: Any) -> bool:
    return isinstance(parsed, dict) and ("errorType" in parsed or "errorMessage" in parsed)


def public_error(error: Any) -> Any:
    """What a workflow sees of a caught error (``$.error`` as templates read it: ``{{ error
    }}``): ``Error``; ``Cause`` as a person's text, the error's message for one a step
    Lambda raised (its name, message and Relayflow's ``details``, never the stack trace
    or a server path) and :func:`public_cause` of any other; and ``details`` when the error
    carried some (``status`` and a bounded ``body`` for an HTTP or model refusal…). Other
    keys are kept, made public the same way."""
    if not isinstance(error, dict):
        return error
    view: dict[str, Any] = {
        k: _public_value(v) for k, v in error.items() if k not in ("Error", "Cause")
    }
    cause = error.get("Cause")
    if isinstance(cause, str):
        try:
            parsed = json.loads(cause)
        except (ValueError, RecursionError):
            parsed = None
        if _is_lambda_error(parsed):
            message, details = split_details(str(parsed.get("errorMessage") or ""))
            view["Cause"] = public_text(message)[:MAX_CAUSE_CHARS]
            if details:
                view["details"] = _public_value(details)
        else:
            view["Cause"] = public_cause(cause)
    elif "Cause" in error:
        view["Cause"] = _public_value(cause)
    return {"Error": error.get("Error"), **view}


def public_document(value: Any) -> Any:
    """``value`` (a run's output, a step's output) with every caught error in it in its
    public form (:func:`public_error`): the document's ``error``, a fallback's or a settled
    branch's record, a ``for_each`` item's failure. A caught error is any object holding
    ``Error`` and ``Cause``, which is the shape Step Functions gives it."""
    if isinstance(value, dict):
        if "Error" in value and "Cause" in value:
            return public_error(value)
        return {k: public_document(v) for k, v in value.items()}
    if isinstance(value, list):
        return [public_document(v) for v in value]
    return value


def run_error_name(status: str, error: str | None) -> str | None:
    """A finished run's error name: the execution's, or ``States.Timeout`` for a run that
    timed out without one (Step Functions leaves it empty when the state machine's own
    ``TimeoutSeconds`` ends the run while a Task is still waiting)."""
    if error:
        return error
    return RUN_TIMEOUT_ERROR if status.lower() == "timed_out" else None


def timeout_cause(step_type: str, key: str, seconds: float) -> str:
    """The cause of a step's ``States.Timeout``, which Step Functions leaves empty: what
    timed out, after how long, and (for a waiting step) what it waited for in vain:
    ``wait_for_event 'paid' timed out after 5 s without a matching event``."""
    waited = f" without {_WAITS_FOR[step_type]}" if step_type in _WAITS_FOR else ""
    return f"{step_type} '{key}' timed out after {seconds:g} s{waited}"
