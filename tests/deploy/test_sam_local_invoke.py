"""`sam local invoke` as closely as this machine (no Docker) allows, for every sample event.

1. ``relayflow serve``'s in-memory AWS is exposed on a local port (``--aws-port``), in this
   process: the local runtime with its table, bus, signing key and state machines.
2. The SAM CLI's own resolver computes each function's environment from template.yaml and
   ``events/env.json`` (``sam_local_env.py``: stack provider, intrinsic resolver, env-vars file
   precedence, blanks for what it cannot resolve). The only change to env.json is the
   endpoint's host and port (Docker's ``host.docker.internal:4566`` → this port).
3. Each sample runs in a fresh python3.12 process (the functions' runtime: ``make
   lambda-python``, which holds the layer's requirements and the runtime's boto3) with exactly
   that environment and, on ``PYTHONPATH``, the **built** artifact: the function's folder and
   the layer's ``relayflow`` package from ``sam build`` (conftest.py), never the source tree —
   what ``sam local invoke <Function> -e events/<fn>/<sample>.json --env-vars events/env.json``
   gives the container. (The layer's compiled dependencies are built for arm64 and cannot
   load on this machine; the lambda venv holds the same pinned versions for its platform.)

Before the samples, ``api/put_workflow.json`` registers its workflow (so ``api/start_run.json``
finds it, in any order). Each sample must end as ``events/outcomes.json`` documents it
(docs/operations.md renders the same file): a result (for the API, its status and error code)
or a named error. And no handler may import the local runtime or the CLI, and every relayflow
module a handler loads comes from the build.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from relayflow_testing import load_handler
from sam_template import ROOT, function_resources, load_template

FUNCTIONS = function_resources(load_template())
OUTCOMES = json.loads((ROOT / "events" / "outcomes.json").read_text())
SAMPLES = sorted(
    (kind, path) for kind in FUNCTIONS for path in (ROOT / "events" / kind).glob("*.json")
)
LAMBDA_PYTHON = ROOT / ".venv" / "tools" / "lambda-py312" / "bin" / "python"
SAM_PYTHON = ROOT / ".venv" / "tools" / "sam" / "bin" / "python"
DOCKER_ENDPOINT = "http://host.docker.internal:4566"
#: What the function containers may import from relayflow at run time: not these.
NOT_IN_LAMBDA = ("relayflow.local", "relayflow.cli")


@pytest.fixture(scope="module")
def exposed_aws() -> Iterator[str]:
    """``relayflow serve --aws-port 0``, in process: the endpoint URL."""
    from relayflow.local.aws_server import ExposedAws
    from relayflow.local.serve import LocalServer

    with LocalServer("127.0.0.1", 0) as server, ExposedAws("127.0.0.1", 0) as aws:
        assert server.url
        # The state the samples assume, whatever order they run in: the workflow that
        # api/put_workflow.json registers (api/start_run.json starts it) exists.
        register = json.loads((ROOT / "events" / "api" / "put_workflow.json").read_text())
        answer = load_handler("api").handler(register, None)
        assert answer["statusCode"] == 201, answer
        yield aws.url


@pytest.fixture(scope="module")
def sam_environments(exposed_aws: str, tmp_path_factory: pytest.TempPathFactory) -> dict:
    if not SAM_PYTHON.exists():
        pytest.fail("the SAM CLI is missing: run `make sam-cli` (make test does)")
    env_file = tmp_path_factory.mktemp("sam") / "env.json"
    text = (ROOT / "events" / "env.json").read_text()
    assert DOCKER_ENDPOINT in text
    env_file.write_text(text.replace(DOCKER_ENDPOINT, exposed_aws))
    done = subprocess.run(
        [
            str(SAM_PYTHON),
            str(ROOT / "tests" / "deploy" / "sam_local_env.py"),
            "--env-vars",
            str(env_file),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={
            "PATH": os.environ.get("PATH", ""),
            "SAM_CLI_TELEMETRY": "0",
            "HOME": str(env_file.parent),
        },
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def built(sam_build: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The build's layer code as /opt/python holds it: only the ``relayflow`` package (its
    third-party dependencies come from the lambda venv, the same pinned versions)."""
    opt = tmp_path_factory.mktemp("opt-python")
    (opt / "relayflow").symlink_to(sam_build / "RelayflowLayer" / "python" / "relayflow")
    return opt


def invoke(
    function: dict[str, Any], sample: Path, build: Path, layer: Path, logical_id: str
) -> dict[str, Any]:
    """The sample through the built handler, in a fresh python3.12 with the function's
    environment: ``build/<logical_id>`` is /var/task, ``layer`` is /opt/python."""
    env = dict(function["env"])
    task_root = build / logical_id
    # The runtime's own additions: where the code and the layer are (/var/task, /opt/python).
    env["PYTHONPATH"] = os.pathsep.join([str(task_root), str(layer)])
    env["LAMBDA_TASK_ROOT"] = str(task_root)
    env["_HANDLER"] = function["handler"]
    done = subprocess.run(
        # -P: the bootstrap's own folder does not go on sys.path either
        [
            str(LAMBDA_PYTHON),
            "-P",
            str(ROOT / "tests" / "deploy" / "lambda_bootstrap.py"),
            str(sample),
        ],
        capture_output=True,
        text=True,
        cwd=task_root,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    # The function's log lines (the handler's stdout), for the assertion messages
    answer["log"] = "\n".join(done.stdout.strip().splitlines()[:-1])[-4000:]
    # Every relayflow module came from the build, none from the source tree
    assert answer["relayflowFiles"], answer
    outside = [f for f in answer["relayflowFiles"] if not f.startswith(os.path.realpath(build))]
    assert not outside, outside
    return answer


def outcome_of(kind: str, answer: dict[str, Any]) -> dict[str, Any]:
    """The part of an answer events/outcomes.json documents."""
    if "errorType" in answer:
        return {"error": answer["errorType"]}
    result = answer["result"]
    if kind == "api":
        body = json.loads(result.get("body") or "null")
        code = body.get("code") if isinstance(body, dict) and result["statusCode"] >= 400 else None
        return {"status": result["statusCode"], **({"code": code} if code else {})}
    if kind == "webhook":
        return {"status": result["statusCode"]}
    if kind == "authorizer":
        return {"effect": result["policyDocument"]["Statement"][0]["Effect"]}
    return {"result": "ok"}


def test_every_sample_has_a_documented_outcome():
    assert set(OUTCOMES) == {f"{kind}/{path.name}" for kind, path in SAMPLES}


@pytest.mark.skipif(not LAMBDA_PYTHON.exists(), reason="run `make lambda-python` (make test does)")
@pytest.mark.parametrize(("kind", "sample"), SAMPLES, ids=[f"{k}/{p.stem}" for k, p in SAMPLES])
def test_sam_local_invoke_of_each_sample_ends_as_documented(
    kind, sample, sam_environments, sam_build, built
):
    # Given the function's environment as SAM resolves it with events/env.json
    function = sam_environments[FUNCTIONS[kind]]
    assert not [
        k
        for k, v in function["env"].items()
        if k.startswith("RELAYFLOW_") and v in FUNCTIONS.values()
    ]
    # When the sample is invoked in a fresh python3.12 process
    answer = invoke(function, sample, sam_build, built, FUNCTIONS[kind])
    # Then it ends as documented, never as an unplanned error or a server error
    assert outcome_of(kind, answer) == OUTCOMES[f"{kind}/{sample.name}"], answer
    # And the handler imported no local-runtime or CLI code
    assert not [m for m in answer["relayflowModules"] if m.startswith(NOT_IN_LAMBDA)]


@pytest.mark.skipif(not LAMBDA_PYTHON.exists(), reason="run `make lambda-python` (make test does)")
def test_the_lambda_python_holds_the_runtime_sdk_the_makefile_pins():
    # Given the SDK version the Makefile takes the python3.12 runtime to ship
    pinned = re.search(r"^LAMBDA_BOTO3 := (\S+)$", (ROOT / "Makefile").read_text(), re.M)
    assert pinned
    # Then the handlers run with exactly that boto3 and botocore
    done = subprocess.run(
        [
            str(LAMBDA_PYTHON),
            "-c",
            "import boto3, botocore; print(boto3.__version__, botocore.__version__)",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stdout.split() == [pinned.group(1), pinned.group(1)]
