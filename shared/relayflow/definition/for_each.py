"""The settings of a ``for_each`` at scale: ``mode``, ``items_from``, ``items_format`` and
``tolerated_failures`` (docs/flow-control.md, "for_each at scale").

An inline ``for_each`` is one Map state whose iterations write their events into the run's
own history, which Step Functions caps at 25,000 events: a few thousand items at most. A
distributed one runs each item as a child workflow execution with a history of its own, reads
its items from the state document or from an S3 object, and writes the per-item results to S3.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, Field

#: ``s3://<bucket>/<key>``: the bucket is a literal S3 bucket name, the key may hold
#: ``{{ … }}`` placeholders.
ITEMS_FROM_PATTERN = r"^s3://[^/{}]+/.+$"
_BUCKET = re.compile(r"^(?!xn--)(?!.*\.\.)[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_PERCENT = re.compile(r"^\s*(\d+)\s*%\s*$")
#: Item formats an S3 object may hold, by file extension (ItemReader ``InputType``).
FORMAT_BY_EXTENSION = {".json": "json", ".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv"}


@dataclass(frozen=True)
class Tolerance:
    """How many failed items a distributed for_each accepts: a count or a percentage."""

    count: int | None = None
    #: A whole percentage: Step Functions' schema takes an integer from 0 to 100.
    percentage: int | None = None


def parse_tolerance(value: Any) -> Tolerance | None:
    """``5`` (items) or ``"5%"`` (of the items, a whole percentage) → a :class:`Tolerance`;
    anything else is refused with the accepted spellings."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return Tolerance(count=value)
    if isinstance(value, str):
        match = _PERCENT.match(value)
        if match and int(match.group(1)) <= 100:
            return Tolerance(percentage=int(match.group(1)))
    raise ValueError(
        f"{value!r} is not a tolerance: use a count of items (5) or a whole percentage from "
        "0% to 100% ('5%')"
    )


def _checked_tolerance(value: Any) -> Any:
    parse_tolerance(value)
    return value


ToleratedFailures = Annotated[int | str | None, BeforeValidator(_checked_tolerance)]


def split_items_from(items_from: str) -> tuple[str, str]:
    """``s3://bucket/a/b.jsonl`` → ``("bucket", "a/b.jsonl")``."""
    bucket, _, key = items_from.removeprefix("s3://").partition("/")
    return bucket, key


def bucket_problem(bucket: str) -> str | None:
    """Why ``bucket`` is not an S3 bucket name (general purpose bucket naming rules), or None."""
    if _BUCKET.match(bucket) and not re.match(r"^\d+\.\d+\.\d+\.\d+$", bucket):
        return None
    return (
        f"{bucket!r} is not an S3 bucket name (3-63 lower-case letters, digits, '.' and '-', "
        "starting and ending with a letter or digit; no placeholders)"
    )


def items_format_of(items_from: str, items_format: str | None) -> str | None:
    """The declared format, else the one the key's extension names, else None."""
    if items_format:
        return items_format
    key = split_items_from(items_from)[1].lower()
    for extension, name in FORMAT_BY_EXTENSION.items():
        if key.endswith(extension):
            return name
    return None


class ForEachScale(BaseModel):
    """The fields of a ``for_each`` step that take it to scale (mixed into ``ForEachStep``)."""

    mode: Literal["auto", "inline", "distributed"] = Field(
        "auto",
        description="inline: one Map state in the run's history (up to a few thousand items). "
        "distributed: a Distributed Map, each item a child workflow execution, results "
        "written to S3. auto: distributed when items come from S3 (items_from), else inline.",
    )
    items_from: str | None = Field(
        None,
        pattern=ITEMS_FROM_PATTERN,
        description="Read the items from an S3 object, s3://<bucket>/<key>, instead of items; "
        "the key (placeholders allowed) is read under the run's tenant prefix, "
        "<bucket>/<tenant>/<key>. Always distributed.",
    )
    items_format: Literal["json", "jsonl", "csv"] | None = Field(
        None,
        description="Format of the items_from object: a JSON array, JSON lines, or CSV with a "
        "header row (each row an object). Default: from the key's extension.",
    )
    tolerated_failures: ToleratedFailures = Field(
        None,
        description="Distributed only: failed items the step accepts, a count (5) or a "
        "whole percentage ('5%'); beyond it the step fails with "
        "States.ExceedToleratedFailureThreshold. Default: none.",
    )

    @property
    def tolerance(self) -> Tolerance | None:
        return parse_tolerance(self.tolerated_failures)

    @property
    def distributed(self) -> bool:
        """Whether this for_each compiles to a Distributed Map."""
        return self.mode == "distributed" or (self.mode == "auto" and self.items_from is not None)
