"""The AWS price table: public on-demand list prices, us-east-1, in US dollars.

The one place AWS prices live (model tokens stay in :mod:`relayflow.ai.prices`, re-exported
here as :func:`ai_token_cost`). ``relayflow compile --cost``, the run items'
``estimated_cost_usd`` and ``bench/cost_bench.py`` all read it. List prices, first tier, no
free tier and no savings plans; they change: update them here, with their source.

Sources (read November 2026):

- Step Functions, https://aws.amazon.com/step-functions/pricing/ : Standard $0.025 per 1,000
  state transitions (retries count); Express $1.00 per 1M requests plus duration, rounded up
  to the next 100 ms, billed in 64 MB chunks of the memory an execution uses (50 MB + the
  definition + the execution data times the Map/Parallel steps), $0.06 per GB-hour for the
  first 1,000 GB-hours a month (then $0.03, then $0.01642; the first tier is used here).
- Lambda, https://aws.amazon.com/lambda/pricing/ : $0.20 per 1M requests; arm64 duration
  $0.0000133334 per GB-second (first 7.5 billion GB-s a month), billed per 1 ms.
- API Gateway, https://aws.amazon.com/api-gateway/pricing/ : REST APIs $3.50 per 1M calls
  (first 333 million a month); HTTP APIs $1.00 per 1M requests (first 300 million a month;
  priced only in the bench's what-ifs, Relayflow deploys a REST API).
- DynamoDB on-demand, https://aws.amazon.com/dynamodb/pricing/on-demand/ : $0.625 per 1M
  write request units, $0.125 per 1M read request units (since November 2024).
- EventBridge, https://aws.amazon.com/eventbridge/pricing/ : custom events $1.00 per 1M
  (events AWS services send, such as Step Functions status changes, are free).
- S3 Standard, https://aws.amazon.com/s3/pricing/ : $0.005 per 1,000 PUT/COPY/POST/LIST,
  $0.0004 per 1,000 GET; SES, https://aws.amazon.com/ses/pricing/ : $0.10 per 1,000 emails.
- CloudWatch Logs, https://aws.amazon.com/cloudwatch/pricing/ (Logs tab, Vended Logs): Step
  Functions execution logs are billed as vended logs
  (https://docs.aws.amazon.com/step-functions/latest/dg/cw-logs.html): delivery to CloudWatch
  Logs (ingestion) $0.50 per GB for the first 10 TB a month; storage $0.03 per GB-month. A log
  event counts its message's UTF-8 bytes plus 26 bytes (the size rule of ``PutLogEvents``,
  https://docs.aws.amazon.com/AmazonCloudWatchLogs/latest/APIReference/API_PutLogEvents.html).
"""

from __future__ import annotations

from relayflow.ai.prices import estimate_cost as ai_token_cost

__all__ = [
    "API_GATEWAY_HTTP_PER_REQUEST",
    "API_GATEWAY_REST_PER_REQUEST",
    "DYNAMODB_PER_READ_UNIT",
    "DYNAMODB_PER_WRITE_UNIT",
    "EVENTS_PER_EVENT",
    "EXPRESS_BASE_MEMORY_MB",
    "EXPRESS_BILLING_MS",
    "EXPRESS_MEMORY_CHUNK_MB",
    "EXPRESS_PER_GB_SECOND",
    "EXPRESS_PER_REQUEST",
    "LAMBDA_PER_GB_SECOND",
    "LAMBDA_PER_REQUEST",
    "LOGS_EVENT_OVERHEAD_BYTES",
    "LOGS_INGESTION_PER_GB",
    "LOGS_STORAGE_PER_GB_MONTH",
    "S3_PER_GET",
    "S3_PER_PUT",
    "SES_PER_EMAIL",
    "STANDARD_PER_TRANSITION",
    "ai_token_cost",
]

#: Step Functions Standard: $0.025 per 1,000 state transitions.
STANDARD_PER_TRANSITION = 0.025 / 1000
#: Step Functions Express: $1.00 per 1M requests (executions started).
EXPRESS_PER_REQUEST = 1.00 / 1_000_000
#: Step Functions Express duration: $0.06 per GB-hour (first 1,000 GB-hours a month).
EXPRESS_PER_GB_SECOND = 0.06 / 3600
#: Express duration is rounded up to this many milliseconds ...
EXPRESS_BILLING_MS = 100
#: ... and memory to this many megabytes ...
EXPRESS_MEMORY_CHUNK_MB = 64
#: ... of at least this much (AWS's estimate: 50 MB + definition + execution data).
EXPRESS_BASE_MEMORY_MB = 50
#: Lambda: $0.20 per 1M requests.
LAMBDA_PER_REQUEST = 0.20 / 1_000_000
#: Lambda arm64 duration: per GB-second, billed per 1 ms.
LAMBDA_PER_GB_SECOND = 0.0000133334
#: API Gateway REST API: $3.50 per 1M calls.
API_GATEWAY_REST_PER_REQUEST = 3.50 / 1_000_000
#: API Gateway HTTP API: $1.00 per 1M requests (of up to 512 KB).
API_GATEWAY_HTTP_PER_REQUEST = 1.00 / 1_000_000
#: DynamoDB on-demand: $0.625 per 1M write request units (1 KB each).
DYNAMODB_PER_WRITE_UNIT = 0.625 / 1_000_000
#: DynamoDB on-demand: $0.125 per 1M read request units (4 KB strongly consistent).
DYNAMODB_PER_READ_UNIT = 0.125 / 1_000_000
#: EventBridge custom events: $1.00 per 1M.
EVENTS_PER_EVENT = 1.00 / 1_000_000
#: S3 Standard PUT, COPY, POST, LIST: $0.005 per 1,000.
S3_PER_PUT = 0.005 / 1000
#: S3 Standard GET and others: $0.0004 per 1,000.
S3_PER_GET = 0.0004 / 1000
#: SES outbound: $0.10 per 1,000 emails.
SES_PER_EMAIL = 0.10 / 1000
#: CloudWatch vended logs (Step Functions execution logs): $0.50 per GB delivered (first 10 TB).
LOGS_INGESTION_PER_GB = 0.50
#: CloudWatch Logs storage: $0.03 per GB-month.
LOGS_STORAGE_PER_GB_MONTH = 0.03
#: Bytes CloudWatch Logs adds to each log event's message.
LOGS_EVENT_OVERHEAD_BYTES = 26
