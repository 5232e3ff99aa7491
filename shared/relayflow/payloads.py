"""Large step outputs go to S3; the state document carries a small reference instead.

Step Functions refuses a state document over 256 KB. A step Lambda whose output is over
``offload_threshold_bytes`` (or would push the document over it) writes the output to the
payload bucket and returns ``{"$relayflow_ref": {...}}``. Step Lambdas resolve references in
the document they receive before templates or code read it, so later steps see the value.
Native states (Pass, Choice) copy a reference as it is; they cannot open it.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any

from relayflow.adapters.aws import client
from relayflow.document import StepTask
from relayflow.errors import InvalidArgsError, PayloadTooLarge
from relayflow.settings import get_settings

REF_KEY = "$relayflow_ref"
#: About the size of a reference in the document; smaller outputs are never offloaded.
_REFERENCE_BYTES = 512


def json_size(value: Any) -> int:
    """Bytes of ``value`` as compact JSON (how Step Functions measures a document)."""
    return len(json.dumps(value, separators=(",", ":"), default=str).encode())


def is_ref(value: Any) -> bool:
    return isinstance(value, dict) and len(value) == 1 and REF_KEY in value


def offload_if_large(output: Any, *, task: StepTask) -> Any:
    """Return ``output``, or a reference to it in S3 when it, or the document it would join
    (as Step Functions holds it, references unread), is over the threshold."""
    settings = get_settings()
    limit = settings.offload_threshold_bytes
    size = json_size(output)
    doc_size = task._doc_bytes if task._doc_bytes is not None else json_size(task.doc)
    if size <= limit and size + doc_size <= limit:
        return output
    if size <= _REFERENCE_BYTES:
        # A reference would be as large as the output: offloading saves nothing, and a
        # routing Choice (a condition's result) must be able to read the value itself.
        return output
    run = task.doc.get("run") or {}
    step_key = task.step.key
    body = json.dumps(output, separators=(",", ":"), default=str).encode()
    tenant, run_id = run.get("tenant", "local"), run.get("id", "run")
    key = f"payloads/{tenant}/{run_id}/{step_key}/{uuid.uuid4().hex}.json"
    try:
        client("s3").put_object(
            Bucket=settings.payload_bucket, Key=key, Body=body, ContentType="application/json"
        )
    except Exception as exc:  # botocore errors: AccessDenied for the code function, and others
        raise PayloadTooLarge(
            f"step '{step_key}' produced {size} bytes; with the {doc_size}-byte document that is "
            f"over the {limit}-byte budget, and offloading to S3 failed: {type(exc).__name__}",
            size=size,
        ) from exc
    return {
        REF_KEY: {
            "bucket": settings.payload_bucket,
            "key": key,
            "size": len(body),
            "sha256": hashlib.sha256(body).hexdigest(),
        }
    }


def _fetch(ref: dict[str, Any]) -> Any:
    try:
        obj = client("s3").get_object(Bucket=ref["bucket"], Key=ref["key"])
    except Exception as exc:  # botocore ClientError and friends: name the reference
        raise InvalidArgsError(
            f"cannot read offloaded payload s3://{ref.get('bucket')}/{ref.get('key')}: {exc}"
        ) from exc
    body = obj["Body"].read()
    if ref.get("sha256") and hashlib.sha256(body).hexdigest() != ref["sha256"]:
        raise InvalidArgsError(f"offloaded payload s3://{ref['bucket']}/{ref['key']} was altered")
    return json.loads(body)


def resolve_refs(value: Any) -> Any:
    """Replace every reference in ``value`` with the payload it points to."""
    if is_ref(value):
        return _fetch(value[REF_KEY])
    if isinstance(value, dict):
        return {k: resolve_refs(v) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve_refs(v) for v in value]
    return value


def contains_ref(value: Any) -> bool:
    if is_ref(value):
        return True
    if isinstance(value, dict):
        return any(contains_ref(v) for v in value.values())
    if isinstance(value, list):
        return any(contains_ref(v) for v in value)
    return False
