"""The limits a piece of user code runs under, and the marker that replaces an oversized output.

Standard library only: :mod:`relayflow.sandbox` must import without pydantic or boto3 so that
it stays cheap to load and testable from a bare interpreter.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from relayflow.settings import Settings

#: Characters of the JSON text an output truncation marker keeps as ``preview``. The runner
#: (which cannot import this module) holds the same number.
PREVIEW_CHARS = 1000


@dataclass(frozen=True)
class Limits:
    """What one run of user code may use. Every field is enforced in the child process."""

    cpu_seconds: int
    memory_mb: int
    wall_seconds: float
    output_bytes: int
    #: Largest file the code may write (RLIMIT_FSIZE); a bigger write fails with EFBIG.
    file_bytes: int = 1_000_000
    #: Open file descriptors (RLIMIT_NOFILE), the standard streams included.
    open_files: int = 32
    #: RLIMIT_NPROC. 0: no new process or thread. Root (uid 0) is exempt from it.
    processes: int = 0
    #: Characters of print() output kept; the rest is counted, not kept.
    stdout_chars: int = 10_000

    @classmethod
    def for_step(
        cls,
        settings: Settings,
        *,
        cpu_seconds: int | None = None,
        memory_mb: int | None = None,
        wall_seconds: float | None = None,
    ) -> Limits:
        """The settings' ceilings, lowered by a step's own values. A step can ask for less
        than the ceiling, never for more: each limit is the smaller of the two."""
        return cls(
            cpu_seconds=_lower(settings.code_cpu_seconds, cpu_seconds),
            memory_mb=_lower(settings.code_memory_mb, memory_mb),
            wall_seconds=_lower(settings.code_wall_seconds, wall_seconds),
            output_bytes=settings.code_output_bytes,
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _lower(ceiling: Any, requested: Any) -> Any:
    return ceiling if requested is None else min(ceiling, requested)


def output_json(value: Any) -> str:
    """``value`` as compact JSON text; its UTF-8 length is what the output limit measures.
    Raises ``TypeError``/``ValueError`` for a value JSON cannot hold (NaN included)."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def truncation_marker(text: str, limit: int) -> dict[str, Any]:
    """What replaces an output whose JSON ``text`` is over ``limit`` bytes."""
    return {
        "truncated": True,
        "bytes": len(text.encode()),
        "limit": limit,
        "preview": text[:PREVIEW_CHARS],
    }


def truncate_output(value: Any, limit: int) -> Any:
    """``value`` itself when its JSON is at most ``limit`` bytes, else its truncation marker."""
    text = output_json(value)
    return value if len(text.encode()) <= limit else truncation_marker(text, limit)
