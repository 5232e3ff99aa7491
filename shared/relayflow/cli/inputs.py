"""JSON-valued options (``--input``, ``--data``): JSON text, or ``@file`` holding it, read
under the JSON intake policy (relayflow.intake)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from relayflow.cli.output import UsageError


def json_option(value: str | None, option: str) -> Any:
    """A ``--data``/``--input`` value: JSON text, or ``@file`` holding it; ``None`` when not
    given. A bad value is a one-line :class:`UsageError` naming the option, the path in the
    document and the rule."""
    from relayflow.intake import IntakeError, decode_utf8, loads

    if value is None:
        return None
    try:
        if value.startswith("@"):
            text = decode_utf8(Path(value[1:]).read_bytes(), f"{option} {value}")
        else:
            text = value
        return loads(text)
    except OSError as exc:
        raise UsageError(f"{option} {value}: {exc.strerror}") from exc
    except json.JSONDecodeError as exc:
        raise UsageError(f"{option} is not valid JSON: {exc.msg} (line {exc.lineno})") from exc
    except IntakeError as exc:
        raise UsageError(f"{option} refused: {exc.message} [{exc.rule}]") from exc


def read_input(value: str | None) -> Any:
    """The ``--input`` trigger payload; ``{}`` when not given."""
    if value is None:
        return {}
    return json_option(value, "--input")


def resources_option(path: str) -> Any:
    """The ``--resources`` file of ``run`` and ``serve`` (relayflow.local.resources); one that
    cannot be read is a one-line :class:`UsageError` (pydantic's and PyYAML's reasons span
    lines)."""
    import yaml

    from relayflow.local.resources import load_resources

    try:
        return load_resources(path)
    except (OSError, ValueError, yaml.YAMLError) as exc:
        reason = " ".join(str(exc).split())
        raise UsageError(f"--resources {path}: {reason}") from exc
