"""`relayflow serve --aws-port`: the local runtime's in-memory AWS, reached from outside."""

from __future__ import annotations

import boto3
import pytest

from relayflow.cli.main import build_parser
from relayflow.local import LocalRuntime
from relayflow.local.aws_server import ExposedAws

pytestmark = pytest.mark.integration


def test_the_exposed_endpoint_serves_the_runtimes_own_state():
    # Given a runtime with its table, and its AWS exposed on a free port
    with LocalRuntime(time_scale=0.001) as runtime, ExposedAws("127.0.0.1", 0) as aws:
        runtime.client("sqs").create_queue(QueueName="made-in-process")
        # When a client of another process's kind (its own session, the endpoint) looks
        outside = boto3.session.Session(
            aws_access_key_id="defaultkey", aws_secret_access_key="defaultsecret"
        )
        dynamodb = outside.client("dynamodb", region_name="us-east-1", endpoint_url=aws.url)
        sqs = outside.client("sqs", region_name="us-east-1", endpoint_url=aws.url)
        # Then it sees what the runtime holds, and what it writes the runtime sees
        assert "relayflow" in dynamodb.list_tables()["TableNames"]
        assert any(u.endswith("/made-in-process") for u in sqs.list_queues()["QueueUrls"])
        sqs.create_queue(QueueName="made-outside")
        urls = runtime.client("sqs").list_queues()["QueueUrls"]
        assert any(u.endswith("/made-outside") for u in urls)


def test_serve_takes_an_aws_port():
    args = build_parser().parse_args(["serve", "--aws-port", "4566"])
    assert args.aws_port == 4566
    assert build_parser().parse_args(["serve"]).aws_port is None


def test_serve_binds_the_in_memory_aws_where_a_container_can_reach_it(monkeypatch):
    # Given serve asked to expose its AWS on every interface (a Linux sam local container
    # reaches the host through the Docker bridge, never through 127.0.0.1)
    from relayflow.cli import serve as cli_serve

    args = build_parser().parse_args(["serve", "--aws-port", "4566", "--aws-host", "0.0.0.0"])
    assert (args.host, args.aws_host) == ("127.0.0.1", "0.0.0.0")
    bound: list[tuple[str, int | None]] = []
    monkeypatch.setattr(cli_serve, "_expose_aws", lambda host, port: bound.append((host, port)))

    class Stop(Exception):
        pass

    class Server:
        url = "http://127.0.0.1:8080"
        bootstrap_key = admin_token = "k"
        state = None  # no --state: everything in memory

        def __init__(self, *a: object, **k: object) -> None:
            pass

        def __enter__(self) -> Server:
            return self

        def __exit__(self, *exc: object) -> None:
            pass

    import relayflow.local.serve as serve_module

    monkeypatch.setattr(serve_module, "LocalServer", Server)
    monkeypatch.setattr(cli_serve, "_stop_on_sigterm", lambda: (_ for _ in ()).throw(Stop()))
    # When serve starts
    with pytest.raises(Stop):
        cli_serve.cmd_serve(args)
    # Then the AWS endpoint listens on that address while the API stays on --host
    assert bound == [("0.0.0.0", 4566)]
    # And without --aws-host it follows --host, as before
    assert build_parser().parse_args(["serve"]).aws_host is None
