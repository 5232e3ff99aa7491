"""``relayflow serve``: the control API on this machine, with everything in memory (the local
runtime, the table, the bus, the authorizer and the recorder)."""

from __future__ import annotations

import argparse
import signal
import sys
from typing import Any

from relayflow.cli import EXIT_OK, EXIT_RUN_FAILED


def _stop_on_sigterm() -> None:
    """SIGTERM (a process manager, ``kill``) stops the server as Ctrl-C does."""

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)


def cmd_serve(args: argparse.Namespace) -> int:
    import threading

    from relayflow.cli import EXIT_INVALID
    from relayflow.cli_api import API_KEY_ENV, API_URL_ENV
    from relayflow.local.serve import LocalServer

    resources = _load_resources(args.resources) if args.resources else None
    if isinstance(resources, str):
        print(f"relayflow: --resources {args.resources}: {resources}", file=sys.stderr)
        return EXIT_INVALID
    try:
        server = LocalServer(
            args.host,
            args.port,
            time_scale=args.time_scale,
            rate_per_second=args.rate_limit,
            rate_burst=max(1, int(args.rate_limit * 4)),
            access_log=sys.stderr,
            maintenance_interval=60.0,
        )
        server.__enter__()
        if resources is not None:
            from relayflow.local.resources import provision

            created = provision(resources)
        aws = _expose_aws(args.aws_host or args.host, args.aws_port)
    except OSError as exc:
        print(
            f"relayflow: cannot listen on {args.host}:{args.port}: {exc.strerror}", file=sys.stderr
        )
        return EXIT_RUN_FAILED
    try:
        print(f"Relayflow control API on {server.url} (Swagger UI: {server.url}/swagger)")
        print(f"API key of tenant 'local': {server.bootstrap_key}")
        print(f"admin token (relayflow keys --admin-token): {server.admin_token}")
        print(f"Console: {server.url}/console/login#key={server.bootstrap_key}")
        print(f"  export {API_URL_ENV}={server.url} {API_KEY_ENV}={server.bootstrap_key}")
        if aws is not None:
            print(f"in-memory AWS on {aws.url} (sam local invoke --env-vars events/env.json)")
        if resources is not None:
            made = sum(len(names) for names in created.values())
            print(f"created {made} resource(s) from {args.resources} in the in-memory AWS")
        print(
            "Everything (workflows, runs, API keys, waits) lives in memory: Ctrl-C stops the "
            "server and forgets it.",
            flush=True,
        )
        _stop_on_sigterm()
        threading.Event().wait()
    except KeyboardInterrupt:
        print("stopping", file=sys.stderr)
    finally:
        if aws is not None:
            aws.close()
        server.__exit__(None, None, None)
    return EXIT_OK


def _load_resources(path: str) -> Any:
    """The ``--resources`` file, or the one-line reason it cannot be read."""
    import yaml

    from relayflow.local.resources import load_resources

    try:
        return load_resources(path)
    except (OSError, ValueError, yaml.YAMLError) as exc:
        return " ".join(str(exc).split())


def _expose_aws(host: str, port: int | None) -> Any:
    """``--aws-port`` (and ``--aws-host``): serve's in-memory AWS on a port
    (relayflow.local.aws_server)."""
    if port is None:
        return None
    from relayflow.local.aws_server import ExposedAws

    return ExposedAws(host, port).__enter__()
