"""Bedrock batch inference for ``llm_batch`` (Anthropic, Amazon Nova, Meta Llama 3 and
Mistral models on Bedrock).

Records go to the payload bucket as JSONL (``payloads/batch/<job>/input.jsonl``, one
``{"recordId", "modelInput"}`` per item, ``modelInput`` in the model family's ``InvokeModel``
format, :mod:`relayflow.ai.bedrock_formats`), ``CreateModelInvocationJob`` runs them with the
stack's batch service role, and the results are read back from the job's ``.jsonl.out``
objects in the same family's response format.

A job needs at least the account's minimum number of records ("Minimum number of records per
batch inference job", a Service Quotas value per model; AWS documents 100 by default).
:func:`check_minimum` reads it and refuses a smaller batch (``Relayflow.BatchTooSmall``) or,
with ``below_minimum: one_by_one``, tells the step to run the items through Converse.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from relayflow.ai.batch import BatchRequest, BatchStatus
from relayflow.ai.bedrock_formats import FORMATS, record_format
from relayflow.errors import BatchFailed, BatchTooSmall, InvalidArgsError, TransientError

#: Used when Service Quotas lists no such quota for the model (AWS's documented default).
DEFAULT_MINIMUM_RECORDS = 100
QUOTA_NAME = "minimum number of records per batch inference job"
_RUNNING = {"Submitted", "Validating", "Scheduled", "InProgress", "Stopping"}
_ENDED = {"Completed", "PartiallyCompleted"}
#: Record ids are ``REC`` + 8 digits: the 11-character alphanumeric ``recordId`` AWS documents,
#: unique in the job (a job holds at most 50,000 records by default).
_RECORD_ID = re.compile(r"REC(\d{8})")


def record_id(index: int) -> str:
    """The ``recordId`` of the job's item ``index``."""
    return f"REC{index:08d}"


def _family(model_id: str) -> str:
    """``anthropic.claude-3-5-haiku-20241022-v1:0`` → ``claude 3 5 haiku`` (quota names spell
    models "… for Claude 3.5 Haiku", compared with dots as spaces);
    ``meta.llama3-1-70b-instruct-v1:0`` → ``llama 3 1 70b instruct`` ("… Llama 3.1 70B
    Instruct")."""
    name = model_id.split(":")[0]
    for region in ("us.", "eu.", "apac.", "global."):
        name = name.removeprefix(region)
    name = name.split(".", 1)[-1]
    words = [w for w in name.split("-") if not re.fullmatch(r"\d{8}|v\d+", w)]
    return re.sub(r"([a-z])(\d)", r"\1 \2", " ".join(words))


def minimum_records(model_id: str, quotas: Any = None) -> int:
    """The account's minimum records per batch job for ``model_id`` (Service Quotas)."""
    from botocore.exceptions import BotoCoreError, ClientError

    if quotas is None:
        from relayflow.adapters.aws import client

        quotas = client("service-quotas")
    found: list[tuple[str, float]] = []
    try:
        for page in quotas.get_paginator("list_service_quotas").paginate(ServiceCode="bedrock"):
            for quota in page.get("Quotas", []):
                name = str(quota.get("QuotaName", ""))
                if QUOTA_NAME in name.lower():
                    found.append((name.lower().replace(".", " "), float(quota.get("Value", 0))))
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code")
        if code in ("ThrottlingException", "TooManyRequestsException", "ServiceException"):
            raise TransientError(f"service quotas: {code}") from None
        return DEFAULT_MINIMUM_RECORDS  # e.g. AccessDenied: AWS's documented default
    except BotoCoreError as exc:
        raise TransientError(f"service quotas: {exc}") from None
    family = _family(model_id)
    matching = [value for name, value in found if family and family in name]
    values = matching or [value for _, value in found]
    return int(max(values)) if values else DEFAULT_MINIMUM_RECORDS


def check_minimum(model_id: str, count: int, below_minimum: str, quotas: Any = None) -> bool:
    """Whether to run ``count`` items one by one instead (``below_minimum: one_by_one``);
    ``Relayflow.BatchTooSmall`` when the batch is too small and the step says ``fail``."""
    minimum = minimum_records(model_id, quotas)
    if count >= minimum:
        return False
    if below_minimum == "one_by_one":
        return True
    raise BatchTooSmall(
        f"a Bedrock batch inference job for {model_id} needs at least {minimum} records; "
        f"this batch has {count} (set below_minimum: one_by_one to run them through Converse)",
        minimum=minimum,
        records=count,
    )


def run_one_by_one(model_id: str, requests: list[BatchRequest]) -> dict[str, dict[str, Any]]:
    """The fallback: each item through Bedrock Converse, at the on-demand price."""
    from relayflow.ai.messages import ModelRequest, text_block
    from relayflow.ai.providers.bedrock import BedrockProvider

    provider = BedrockProvider()
    results: dict[str, dict[str, Any]] = {}
    for request in requests:
        turn = provider.complete(
            ModelRequest(
                model_id=model_id,
                messages=[{"role": "user", "content": [text_block(request.prompt)]}],
                system=request.system,
                max_tokens=request.max_tokens,
                temperature=request.temperature,
            )
        )
        results[request.custom_id] = {
            "status": "succeeded",
            "response": turn.text,
            "usage": {
                "input_tokens": turn.usage.input_tokens,
                "output_tokens": turn.usage.output_tokens,
            },
        }
    return results


def _custom_id(handle: dict[str, Any], record: str) -> str:
    """The item a result record answers: its index is in the record id. (Handles written
    before record ids were numbered used the custom ids themselves.)"""
    ids = handle.get("ids")
    match = _RECORD_ID.fullmatch(record)
    if isinstance(ids, list) and match and int(match.group(1)) < len(ids):
        return str(ids[int(match.group(1))])
    return record


class BedrockBatch:
    name = "bedrock"

    def __init__(self, bedrock: Any = None, s3: Any = None) -> None:
        from relayflow.adapters.aws import client

        self.bedrock = bedrock or client("bedrock")
        self.s3 = s3 or client("s3")

    def submit(self, model_id: str, requests: list[BatchRequest]) -> dict[str, Any]:
        from relayflow.settings import get_settings

        settings = get_settings()
        if not settings.bedrock_batch_role_arn:
            raise InvalidArgsError("Bedrock batch inference needs RELAYFLOW_BEDROCK_BATCH_ROLE_ARN")
        from relayflow.ai.capabilities import checked_temperature

        fmt = record_format(model_id)
        lines = []
        for index, r in enumerate(requests):
            temperature = checked_temperature(self.name, model_id, r.temperature)
            body = fmt.build(r.prompt, r.system, r.max_tokens, temperature)
            lines.append(json.dumps({"recordId": record_id(index), "modelInput": body}))
        payload = "\n".join(lines).encode()
        name = "relayflow-" + hashlib.sha256(payload + model_id.encode()).hexdigest()[:24]
        bucket = settings.payload_bucket
        prefix = f"payloads/batch/{name}"
        self.s3.put_object(Bucket=bucket, Key=f"{prefix}/input.jsonl", Body=payload)
        job = self.bedrock.create_model_invocation_job(
            jobName=name,
            roleArn=settings.bedrock_batch_role_arn,
            modelId=model_id,
            inputDataConfig={
                "s3InputDataConfig": {
                    "s3Uri": f"s3://{bucket}/{prefix}/input.jsonl",
                    "s3InputFormat": "JSONL",
                }
            },
            outputDataConfig={"s3OutputDataConfig": {"s3Uri": f"s3://{bucket}/{prefix}/output/"}},
        )
        return {
            "id": job["jobArn"],
            "bucket": bucket,
            "prefix": prefix,
            "format": fmt.family,
            "ids": [r.custom_id for r in requests],
        }

    def status(self, handle: dict[str, Any]) -> BatchStatus:
        job = self.bedrock.get_model_invocation_job(jobIdentifier=handle["id"])
        state = job.get("status")
        if state in _RUNNING:
            return BatchStatus("in_progress", handle)
        if state not in _ENDED:
            detail = f": {job['message']}" if job.get("message") else ""
            raise BatchFailed(
                f"Bedrock batch job {handle['id']} ended {state}{detail}",
                batch_id=handle["id"],
                status=state,
            )
        # (handles written before formats were recorded are Anthropic's)
        fmt = FORMATS[str(handle.get("format") or "anthropic")]
        results: dict[str, dict[str, Any]] = {}
        listing = self.s3.list_objects_v2(
            Bucket=handle["bucket"], Prefix=f"{handle['prefix']}/output/"
        )
        for obj in listing.get("Contents", []):
            if not obj["Key"].endswith(".jsonl.out"):
                continue
            text = (
                self.s3.get_object(Bucket=handle["bucket"], Key=obj["Key"])["Body"].read().decode()
            )
            for line in text.splitlines():
                if not line.strip():
                    continue
                row = json.loads(line)
                record = _custom_id(handle, str(row.get("recordId")))
                if row.get("error"):
                    results[record] = {"status": "errored", "error": row["error"]}
                    continue
                text_out, usage = fmt.read(row.get("modelOutput") or {})
                results[record] = {"status": "succeeded", "response": text_out}
                if usage is not None:  # Mistral's output carries no token counts
                    results[record]["usage"] = usage
        return BatchStatus("ended", handle, results)
