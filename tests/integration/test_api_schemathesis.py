"""Property-based tests of the control API from its own OpenAPI document (schemathesis).

For every operation of ``/openapi.json``, schemathesis generates requests that fit the schema
(positive) and requests that break it (negative), and sends them over HTTP to a LocalServer
with the bootstrap key. Whatever comes in, the API must never answer 5xx, and every answer must
be one the document declares, with the declared content type and body schema. Bounded and
deterministic: a fixed seed and a number of cases per operation and mode (at most
``MAX_EXAMPLES``), never a wall-clock budget, so a loaded machine runs the same cases, only
slower; every operation must have been sent at least ``MIN_CASES`` of them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from relayflow_testing import HTTP_TIMEOUT

schemathesis = pytest.importorskip("schemathesis")

from hypothesis import HealthCheck, Phase, given, seed, settings  # noqa: E402
from hypothesis.errors import Unsatisfiable  # noqa: E402
from schemathesis.specs.openapi.checks import (  # noqa: E402
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from relayflow.local.serve import LocalServer  # noqa: E402

pytestmark = [
    pytest.mark.integration,
    # moto's ASL parser raises the recursion limit in a server thread while Hypothesis runs.
    pytest.mark.filterwarnings("ignore:The recursion limit will not be reset"),
]

#: Cases per operation and mode: some with generated ids, the rest aimed at seeded items.
MAX_EXAMPLES = 25
SEEDED_EXAMPLES = 10
#: Cases every operation must have been sent in each mode (Hypothesis sends fewer than
#: ``max_examples`` only when an operation's inputs have fewer distinct values).
MIN_CASES = 3
SEED = 20261130


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    with LocalServer(time_scale=0.001) as local:
        # The property tests send bursts; throttling is tested elsewhere.
        local.set_rate_limit(per_second=1000, burst=10_000)
        yield local


@pytest.fixture(scope="module")
def seeded(server: LocalServer) -> dict[str, str]:
    """A workflow and a run to find, so generated ids sometimes hit real items."""
    import httpx

    headers = {"X-Api-Key": server.bootstrap_key}
    definition = {
        "id": "a",
        "start": "s",
        "steps": {"s": {"type": "transform", "mapping": {"ok": True}}},
    }
    assert httpx.put(
        f"{server.url}/workflows/a", json=definition, headers=headers, timeout=HTTP_TIMEOUT
    ).is_success
    run = httpx.post(
        f"{server.url}/workflows/a/runs", json={}, headers=headers, timeout=HTTP_TIMEOUT
    ).json()
    return {"workflow_id": "a", "run_id": run["run_id"]}


@pytest.fixture(scope="module")
def schema(server: LocalServer) -> Any:
    return schemathesis.openapi.from_url(f"{server.url}/openapi.json")


def operations(schema: Any) -> list[Any]:
    """Every operation; DELETE last, so the seeded workflow stays enabled for the others."""
    found = [result.ok() for result in schema.get_all_operations()]
    return sorted(found, key=lambda operation: operation.method.upper() == "DELETE")


OPERATIONS = [
    "DELETE /dlq/{run_id}",
    "DELETE /workflows/{workflow_id}",
    "GET /approvals",
    "GET /approvals/{approval_id}",
    "GET /breakers",
    "GET /dlq",
    "GET /dlq/{run_id}",
    "GET /runs",
    "GET /runs/{run_id}",
    "GET /waitpoints",
    "GET /waitpoints/{waitpoint_id}",
    "GET /workflows",
    "GET /workflows/{workflow_id}",
    "GET /workflows/{workflow_id}/runs",
    "POST /approvals/{approval_id}/respond",
    "POST /breakers/{breaker_id}/reset",
    "POST /dlq/{run_id}/retry",
    "POST /events",
    "POST /runs/{run_id}/cancel",
    "POST /runs/{run_id}/continue",
    "POST /runs/{run_id}/rerun",
    "POST /runs/{run_id}/resume",
    "POST /waitpoints/{waitpoint_id}/complete",
    "POST /waitpoints/{waitpoint_id}/fail",
    "POST /workflows/{workflow_id}/rollback",
    "POST /workflows/{workflow_id}/runs",
    "PUT /workflows/{workflow_id}",
]


def test_the_document_loads_and_has_every_operation(schema):
    labels = sorted(operation.label for operation in operations(schema))
    assert labels == OPERATIONS


def exercise(
    operation: Any,
    mode: str,
    server: LocalServer,
    auth: dict[str, str],
    *,
    examples: int,
    path_parameters: dict[str, str] | None = None,
) -> tuple[list[int], list[str]]:
    """Send up to ``examples`` generated requests of ``operation``; the status of each and
    the 5xx answers (with a curl command to replay each)."""
    statuses: list[int] = []
    failures: list[str] = []
    strategy = operation.as_strategy(
        generation_mode=schemathesis.GenerationMode(mode),
        headers=auth,
        path_parameters=path_parameters,
    )

    @seed(SEED)
    @settings(
        max_examples=examples,
        database=None,
        deadline=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
        print_blob=False,
    )
    @given(case=strategy)
    def check(case: Any) -> None:
        response = case.call(base_url=server.url, headers=auth, timeout=60)
        statuses.append(response.status_code)
        if response.status_code >= 500:
            failures.append(
                f"{operation.label}: {response.status_code} {response.text[:300]} "
                f"for {case.as_curl_command()}"
            )
            return
        case.validate_response(
            response,
            checks=[status_code_conformance, content_type_conformance, response_schema_conformance],
        )

    check()
    return statuses, failures


@pytest.mark.parametrize("mode", ["positive", "negative"])
def test_no_generated_request_gets_a_server_error(server, schema, seeded, mode):
    # Given every operation of the document, and the bootstrap key
    auth = {"Authorization": f"Bearer {server.bootstrap_key}"}
    seen: dict[str, list[int]] = {}
    failures: list[str] = []
    # When schemathesis sends what it generates for each operation
    for operation in operations(schema):
        names = {p.name for p in operation.path_parameters}
        seeded_ids = {name: value for name, value in seeded.items() if name in names}
        statuses, failed = exercise(
            operation, mode, server, auth, examples=MAX_EXAMPLES - SEEDED_EXAMPLES
        )
        if seeded_ids:
            try:
                more, failed_more = exercise(
                    operation,
                    mode,
                    server,
                    auth,
                    examples=SEEDED_EXAMPLES,
                    path_parameters=seeded_ids,
                )
            except Unsatisfiable:
                # Negative mode with the ids fixed: the operation has nothing else to break.
                assert mode == "negative"
            else:
                statuses, failed = statuses + more, failed + failed_more
        seen[operation.label] = statuses
        failures += failed
    # Then no answer is a 5xx, and (checked above) every answer is one the document declares
    assert not failures, "\n".join(failures)
    # And every operation was sent its cases, however long they took
    counts = {label: len(statuses) for label, statuses in seen.items()}
    assert sorted(counts) == OPERATIONS
    assert all(count >= MIN_CASES for count in counts.values()), counts
    if mode == "positive":
        # Valid requests reach the control plane: some of them succeed.
        assert any(status < 300 for statuses in seen.values() for status in statuses), seen
