"""What every ``relayflow`` command shares: exit codes, :class:`UsageError`, JSON and table
printing, one-line summaries, and ``run``'s quiet logs. Imports no other CLI module."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from relayflow.definition import DefinitionError

EXIT_OK, EXIT_RUN_FAILED, EXIT_INVALID, EXIT_COMPILER_BUG = 0, 1, 2, 3
#: ``relayflow run`` stopped at a wait only outside input could end (relayflow.cli.run_waits).
EXIT_WAITING = 4

#: Loggers that write a failing step's details again: Powertools' (the step functions') and
#: moto's Step Functions interpreter.
_NOISY = ("relayflow", "moto")


class UsageError(Exception):
    """Bad arguments: reported in one line, exit code 2."""


def print_json(value: Any) -> None:
    """``value`` as indented JSON on stdout (what every ``--json`` prints)."""
    print(json.dumps(value, indent=2, default=str))


def print_problems(exc: DefinitionError, out: TextIO) -> None:
    """A definition's problems, one indented line each."""
    for problem in exc.problems:
        print(f"  {problem}", file=out)


def table_lines(
    headers: Sequence[str], rows: Sequence[Sequence[str]], *, strip: bool = True
) -> list[str]:
    """A text table: the header, a dashed rule and the rows, columns as wide as their widest
    cell; ``strip`` drops trailing blanks from the header and the rows."""
    widths = [
        max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)
    ]

    def line(cells: Sequence[str]) -> str:
        text = "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True))
        return text.rstrip() if strip else text

    return [line(headers), "  ".join("-" * w for w in widths), *(line(row) for row in rows)]


def print_table(
    headers: Sequence[str], rows: Sequence[Sequence[str]], out: TextIO, *, strip: bool = True
) -> None:
    """:func:`table_lines`, printed to ``out``."""
    for text in table_lines(headers, rows, strip=strip):
        print(text, file=out)


def summary(value: Any, width: int = 48) -> str:
    """``value`` as compact JSON, cut at ``width`` characters (empty for ``None``)."""
    if value is None:
        return ""
    text = json.dumps(value, separators=(",", ":"), default=str)
    return text if len(text) <= width else text[: width - 1] + "…"


def would_call_summary(record: Any) -> str | None:
    """``simulated: <call>`` for a step a dry run simulated (``dynamodb:PutItem`` or ``POST
    <url>``), ``read (dry run)`` for a ``dry_run: read`` tool, ``None`` otherwise."""
    if not isinstance(record, dict):
        return None
    if not record.get("simulated"):
        return "read (dry run)" if record.get("read") else None
    call = record.get("call") if isinstance(record.get("call"), dict) else {}
    if call.get("kind") == "aws":
        return f"simulated: {call.get('action') or call.get('tool')}"
    return f"simulated: {call.get('method')} {call.get('url')}"


def readable_cause(cause: Any, limit: int | None = None) -> str:
    """A Lambda error's message from its JSON cause (``{"errorType", "errorMessage",
    "stackTrace"}``), else the cause as it is; cut at ``limit`` characters."""
    text = "" if cause is None else str(cause)
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict) and isinstance(parsed.get("errorMessage"), str):
        text = parsed["errorMessage"]
    if limit is not None and len(text) > limit:
        text = text[: limit - 1] + "…"
    return text


def error_text(error: str, cause: str | None) -> str:
    """``<error>: <message>`` of a step's or run's error (a JSON cause's message,
    :func:`readable_cause`); the error alone when there is no cause."""
    message = readable_cause(cause)
    return f"{error}: {message}" if message else error


@contextmanager
def quiet_logs(enabled: bool = True) -> Iterator[None]:
    """``relayflow run``'s stderr without ``--verbose``: the noisy loggers (which repeat a
    failed step at length) raised to CRITICAL while a local run runs, restored afterwards."""
    if not enabled:
        yield
        return
    # Powertools sets its logger's level when the logger is made: make it first.
    import relayflow.observability  # noqa: F401

    loggers = [logging.getLogger(name) for name in _NOISY]
    levels = [log.level for log in loggers]
    for log in loggers:
        log.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for log, level in zip(loggers, levels, strict=True):
            log.setLevel(level)
