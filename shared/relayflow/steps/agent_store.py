"""Where a suspended agent keeps its conversation while a person decides a tool call: an
object in the payload bucket, referenced from the step's output the way a large output is
(:mod:`relayflow.payloads`), so the resuming invocation gets it back when its Task payload is
parsed. The key is derived from the step execution and the call, so a duplicate invocation
writes the same object."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from relayflow.errors import TransientError
from relayflow.payloads import REF_KEY


def save_conversation(
    doc: Mapping[str, Any], step_key: str, identity: Any, scope: str, state: dict[str, Any]
) -> dict[str, Any]:
    """Store ``state`` (JSON) and return the reference that stands for it in the output."""
    from relayflow.adapters.aws import client
    from relayflow.settings import get_settings

    run = doc.get("run") or {}
    tenant, run_id = str(run.get("tenant") or "local"), str(run.get("id") or "run")
    ident = json.dumps(
        {"who": identity.key_data() if identity is not None else None, "scope": scope},
        sort_keys=True,
    )
    name = hashlib.sha256(ident.encode()).hexdigest()[:32]
    key = f"payloads/{tenant}/{run_id}/{step_key}/conversation-{name}.json"
    # Sorted keys: a duplicate invocation (whose replayed turns may order keys differently)
    # writes the very same bytes, so the reference either invocation returned stays valid.
    body = json.dumps(state, separators=(",", ":"), sort_keys=True, default=str).encode()
    bucket = get_settings().payload_bucket
    try:
        client("s3").put_object(Bucket=bucket, Key=key, Body=body, ContentType="application/json")
    except Exception as exc:  # botocore errors: without the conversation there is no resume
        raise TransientError(
            f"could not save the conversation of agent step {step_key!r}: {type(exc).__name__}"
        ) from exc
    return {
        REF_KEY: {
            "bucket": bucket,
            "key": key,
            "size": len(body),
            "sha256": hashlib.sha256(body).hexdigest(),
        }
    }
